"""Rollout identity: which rollout a request belongs to.

The identity travels in a ``contextvars`` value, never on the wire, so the recorded
requests are exactly what the model endpoint saw. ``asyncio`` copies the context into
every task it creates, so all requests made inside ``with rollout(...)`` (including
those of tasks spawned there) carry the same scope.

Identity must be stable across record and replay: environments derive it from the
item's content, how many times that item has been drawn so far, and the group slot
(``rollout_id_for``), never from uuids or clocks.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ROLLOUT_ID_RULE",
    "RolloutScope",
    "current_rollout",
    "item_fingerprint",
    "rollout",
    "rollout_id_for",
    "rollout_id_problem",
    "task_id_for",
]

_CURRENT: contextvars.ContextVar[RolloutScope | None] = contextvars.ContextVar(
    "hermes_replay_rollout", default=None
)

# One rule for rollout ids, checked where they are made (``rollout``) and where a cassette is
# checked (``verify``), so recording can never write an id that ``verify`` then rejects. Ids
# name folders and are printed by ls/show/miss reports: no path parts, no control characters.
ROLLOUT_ID_RULE = ("a rollout id is 1-256 characters with no path separators ('/', '\\'), "
                   "no '..' and no control characters (e.g. 'train-3fa2c1d09b7e-0-2')")
_ROLLOUT_BAD = re.compile(r"[\x00-\x1f\x7f/\\]|\.\.")


def rollout_id_problem(rollout_id: object) -> str | None:
    """Why ``rollout_id`` breaks ``ROLLOUT_ID_RULE``, or None when it is a good id."""
    if not isinstance(rollout_id, str):
        return f"rollout id must be a string, not {type(rollout_id).__name__}"
    if not rollout_id:
        return "rollout id is empty"
    if len(rollout_id) > 256:
        return f"rollout id is {len(rollout_id)} characters long"
    bad = _ROLLOUT_BAD.search(rollout_id)
    if bad is not None:
        return f"rollout id {rollout_id[:60]!r} contains {bad.group()!r}"
    return None


# A fixed namespace keeps task ids derived from rollout ids identical on every machine.
_TASK_NAMESPACE = uuid.UUID("7b1f3c2e-5d4a-4e8b-9c6f-2a1d0e9b8c7f")


@dataclass
class RolloutScope:
    """One rollout: its id, a per-rollout request counter, and what the env reported."""

    id: str
    _seq: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    outcome: dict[str, Any] = field(default_factory=dict)

    def next_sequence(self) -> int:
        """Sequence number of the next LLM request in this rollout (0, 1, 2 …)."""
        with self._lock:
            n = self._seq
            self._seq += 1
            return n

    @property
    def requests_made(self) -> int:
        return self._seq

    def report(self, **fields: Any) -> None:
        """Attach results (reward, turns, …) that a cassette stores beside the traffic."""
        self.outcome.update(fields)


@contextmanager
def rollout(rollout_id: str) -> Iterator[RolloutScope]:
    """Mark every LLM request made inside the block as belonging to ``rollout_id``.

    Usable in sync and async code alike (``with rollout("x"): await ...``). An id that
    ``verify`` would flag is refused here, before anything is recorded under it.
    """
    problem = rollout_id_problem(rollout_id)
    if problem is not None:
        raise ValueError(f"{problem}; {ROLLOUT_ID_RULE}")
    scope = RolloutScope(rollout_id)
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)
        from hermes_replay import _hooks  # local import: keeps this module dependency-free

        _hooks.rollout_finished(scope)


def current_rollout() -> RolloutScope | None:
    """The scope of the running rollout, or None outside any rollout."""
    return _CURRENT.get()


def item_fingerprint(item: Any) -> str:
    """A short content hash of a dataset item (canonical JSON; falls back to repr)."""
    try:
        text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=repr)
    except (TypeError, ValueError):
        text = repr(item)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def rollout_id_for(item: Any, occurrence: int, slot: int, *, prefix: str = "train") -> str:
    """Stable id: ``{prefix}-{item hash}-{occurrence}-{slot}``, e.g. ``train-3fa2c1d09b7e-0-2``."""
    return f"{prefix}-{item_fingerprint(item)}-{occurrence}-{slot}"


def task_id_for(rollout_id: str) -> str:
    """Deterministic sandbox/task id for a rollout, so prompts and tool output match on replay."""
    return str(uuid.uuid5(_TASK_NAMESPACE, rollout_id))
