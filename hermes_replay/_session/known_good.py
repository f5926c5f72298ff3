"""Known-good replies: how an environment tells a running probe what a correct rollout says.

``hermes-replay probe`` plays a policy that answers each item with its known-good reply and
checks that it scores high. Only the environment knows the item, and only the prompt reaches
the (scripted) model, so the environment offers the reply keyed by the rollout's first user
message; the probe's script looks it up there. Outside a probe the offer is a no-op and the
environment's hook is never even called.

A reply is a string (the final answer), or a list of turns, each a string or a dict
``{"content": str | None, "tool_calls": [[name, arguments], ...]}``.

An environment file nobody may edit (a user's former-style env has no hook) gets its reference
from the probe instead: ``collecting_known_good(reference=...)`` takes a template over the
item's fields (``"ANSWER: {answer}"``) or a function of the item, and it wins over the hook.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["KnownGoodTable", "Reference", "collecting_known_good", "offer_known_good",
           "reference_reply"]

Turn = str | dict[str, Any]
#: Where a probe's known-good reply comes from when not from the env's hook: a template over the
#: item's fields, or a function of the item.
Reference = str | Callable[[Any], Any]


class KnownGoodTable:
    """Prompt text → the turns of its known-good reply (filled by the env, read by the script).

    Written from the environment's event loop and read from the endpoint's thread, hence the lock.
    """

    def __init__(self, reference: Reference | None = None) -> None:
        self._replies: dict[str, list[Turn]] = {}
        self._lock = threading.Lock()
        self.offers = 0  # rollouts whose env offered a reply (a hook returning None counts not)
        self.reference = reference

    def put(self, prompt: str, reply: Any) -> None:
        turns = normalise_reply(reply)
        if turns is None:
            return
        with self._lock:
            self._replies[prompt] = turns
            self.offers += 1

    def get(self, prompt: str) -> list[Turn] | None:
        with self._lock:
            return self._replies.get(prompt)


_ACTIVE: contextvars.ContextVar[KnownGoodTable | None] = contextvars.ContextVar(
    "hermes_replay_known_good", default=None
)


def offer_known_good(prompt: str, make_reply: Callable[[], Any], item: Any = None) -> None:
    """Offer the known-good reply for the rollout whose first user message is ``prompt``.

    ``make_reply()`` is called only while a probe collects replies (never in training or
    replay), so it may be slow or return None ("no reference for this item"). A hook that
    raises is reported as an error of the environment, not swallowed. ``item`` is the
    rollout's item, for a reference the probe was given (``--known-good``), which replaces
    ``make_reply``.
    """
    table = _ACTIVE.get()
    if table is None:
        return
    if table.reference is not None:
        table.put(prompt, reference_reply(table.reference, item))
    else:
        table.put(prompt, make_reply())


def reference_reply(reference: Reference, item: Any) -> Any:
    """The reply ``reference`` gives for ``item``: a template is filled from the item's fields
    (``"ANSWER: {answer}"``), a function is called with the item."""
    if callable(reference):
        return reference(item)
    if not isinstance(item, Mapping):
        raise TypeError(f"known-good template {reference!r} needs an item with fields; this "
                        f"environment's items are {type(item).__name__}. Pass a function of "
                        "the item instead (run_probes(known_good=...)).")
    try:
        return reference.format_map(item)
    except KeyError as exc:
        raise ValueError(f"known-good template {reference!r}: the item has no field {exc}; its "
                       f"fields are {', '.join(map(str, item))}") from None
    except (IndexError, ValueError) as exc:
        raise ValueError(f"known-good template {reference!r} is not a str.format template "
                         f"over the item's fields: {exc}") from None


@contextmanager
def collecting_known_good(reference: Reference | None = None) -> Iterator[KnownGoodTable]:
    """``with collecting_known_good() as table:`` — offers made inside land in ``table``;
    with ``reference``, the reply is built from it instead of the env's hook."""
    table = KnownGoodTable(reference)
    token = _ACTIVE.set(table)
    try:
        yield table
    finally:
        _ACTIVE.reset(token)


def normalise_reply(reply: Any) -> list[Turn] | None:
    """The turns of a hook's return value; None for "no reference"; TypeError if malformed."""
    if reply is None:
        return None
    if isinstance(reply, str):
        return [reply]
    if isinstance(reply, (list, tuple)) and reply:
        turns: list[Turn] = []
        for i, turn in enumerate(reply):
            if isinstance(turn, str):
                turns.append(turn)
            elif isinstance(turn, dict) and set(turn) <= {"content", "tool_calls"}:
                calls = turn.get("tool_calls") or []
                if not all(isinstance(c, (list, tuple)) and len(c) == 2 and isinstance(c[0], str)
                           for c in calls):
                    raise TypeError(f"known-good reply turn {i}: tool_calls must be "
                                    "[[name, arguments], ...]")
                turns.append({"content": turn.get("content"),
                              "tool_calls": [[c[0], c[1]] for c in calls]})
            else:
                raise TypeError(f"known-good reply turn {i} is {type(turn).__name__}; expected a "
                                "string or {'content': ..., 'tool_calls': [[name, args], ...]}")
        return turns
    raise TypeError(f"a known-good reply is a string or a non-empty list of turns, not "
                    f"{type(reply).__name__}")
