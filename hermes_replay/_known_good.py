"""Known-good replies: how an environment tells a running probe what a correct rollout says.

``hermes-replay probe`` plays a policy that answers each item with its known-good reply and
checks that it scores high. Only the environment knows the item, and only the prompt reaches
the (scripted) model, so the environment offers the reply keyed by the rollout's first user
message; the probe's script looks it up there. Outside a probe the offer is a no-op and the
environment's hook is never even called.

A reply is a string (the final answer), or a list of turns, each a string or a dict
``{"content": str | None, "tool_calls": [[name, arguments], ...]}``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["KnownGoodTable", "collecting_known_good", "offer_known_good"]

Turn = str | dict[str, Any]


class KnownGoodTable:
    """Prompt text → the turns of its known-good reply (filled by the env, read by the script).

    Written from the environment's event loop and read from the endpoint's thread, hence the lock.
    """

    def __init__(self) -> None:
        self._replies: dict[str, list[Turn]] = {}
        self._lock = threading.Lock()
        self.offers = 0  # rollouts whose env offered a reply (a hook returning None counts not)

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


def offer_known_good(prompt: str, make_reply: Callable[[], Any]) -> None:
    """Offer the known-good reply for the rollout whose first user message is ``prompt``.

    ``make_reply()`` is called only while a probe collects replies (never in training or
    replay), so it may be slow or return None ("no reference for this item"). A hook that
    raises is reported as an error of the environment, not swallowed.
    """
    table = _ACTIVE.get()
    if table is None:
        return
    table.put(prompt, make_reply())


@contextmanager
def collecting_known_good() -> Iterator[KnownGoodTable]:
    """``with collecting_known_good() as table:`` — offers made inside land in ``table``."""
    table = KnownGoodTable()
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
