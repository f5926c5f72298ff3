"""Rollout identity: which rollout a request belongs to.

The identity travels in a ``contextvars`` value, never on the wire, so the recorded
requests are exactly what the model endpoint saw. ``asyncio`` copies the context into
every task it creates, so all requests made inside ``with rollout(...)`` (including
those of tasks spawned there) carry the same scope.

Identity must be stable across record and replay; how an id is made is the environment
layer's rule (``environments/_ids.py``), never a uuid or a clock. When the block ends, what
the rollout reported goes to the session that was active where it started (``_active``), if
that session is still open, and to no other.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hermes_replay import _active
from hermes_replay._cassette.model import ROLLOUT_ID_RULE, rollout_id_problem

__all__ = ["ROLLOUT_ID_RULE", "RolloutScope", "current_rollout", "current_stage", "rollout",
           "rollout_id_problem", "scoring"]

_CURRENT: contextvars.ContextVar[RolloutScope | None] = contextvars.ContextVar(
    "hermes_replay_rollout", default=None
)
# "agent" while the agent loop runs, "reward" inside ``scoring()``: a judge's request is then
# recorded, matched and reported as a reward call, never as the agent's next turn
_STAGE: contextvars.ContextVar[str] = contextvars.ContextVar("hermes_replay_stage",
                                                             default="agent")

@dataclass
class RolloutScope:
    """One rollout: its id and what the environment reported about it."""

    id: str
    outcome: dict[str, Any] = field(default_factory=dict)

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
    # the run this rollout belongs to is the one active where it starts: a coroutine that an
    # interrupted run abandoned is closed by the garbage collector later, in whatever context
    # runs then, and its report must not land in that later run
    owner = _active.current()
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _reset(_CURRENT, token)
        if owner is not None and _active.is_active(owner):
            owner.rollout_finished(scope)


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    """``var.reset(token)``, except in a coroutine that the garbage collector closes after an
    interrupted ``asyncio.run`` abandoned its task: its ``finally`` runs outside the context it
    set the value in, there is nothing to restore, and the ValueError would only be printed as
    an "exception ignored" under the run's real error."""
    try:
        var.reset(token)
    except ValueError:
        pass


def current_rollout() -> RolloutScope | None:
    """The scope of the running rollout, or None outside any rollout."""
    return _CURRENT.get()


@contextmanager
def scoring() -> Iterator[None]:
    """Mark the LLM requests made inside the block as reward calls of the running rollout (an
    LLM judge in ``compute_reward``): recorded with ``stage: "reward"``, replayed against the
    recorded reward calls of that rollout only, and reported as ``reward call K of rollout
    R`` — so a changed agent turn is one miss, not also the judge's. ``HermesAgentBaseEnv``
    wraps ``compute_reward`` in it; other loops can too."""
    token = _STAGE.set("reward")
    try:
        yield
    finally:
        _reset(_STAGE, token)


def current_stage() -> str:
    """``"reward"`` inside ``scoring()``, else ``"agent"``."""
    return _STAGE.get()


def reward_parts(parts: Any) -> None:
    """Keep the named parts of the running rollout's reward with its outcome (``{"correct":
    1.0, "format": 0.5}``): show, diff, snapshots and the report show them beside the sum.
    Outside a rollout scope it does nothing. Public as ``hermes_replay.reward_parts``; a
    Hermes env returns ``(reward, parts)`` from ``compute_reward`` instead."""
    from hermes_replay._cassette.parts import clean_parts

    scope = current_rollout()
    cleaned = clean_parts(parts)
    if scope is not None and cleaned is not None:
        scope.report(parts=cleaned)
