"""What a fork starts from, checked before anything runs: the parent's rollout, its turn K, the
tool call a replaced message stands for, and the branch's link to its parent.

Every refusal is a ``ForkError`` naming the cassette, the rollout and the turn, and the next
step. Turns count from 1, as everywhere (turn K is the rollout's K-th model request).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._cassette.model import Cassette, Interaction, RolloutRecord
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._errors import ForkError
from hermes_replay._session.traffic import TOOL_HTTP

__all__ = ["ForkPlan", "agent_turns", "fork_link", "plan_fork", "rollout_fingerprint"]


@dataclass(frozen=True)
class ForkPlan:
    """A checked fork point of a parent cassette."""

    cassette: Path
    rollout: str
    turn: int
    turns: int  # the parent rollout's agent turns
    fingerprint: str  # ``rollout_fingerprint`` of the parent rollout
    replace_seq: int | None = None  # the recorded tool call whose result is replaced
    replace_text: str | None = None

    def session_fork(self, strict: bool) -> dict[str, Any]:
        """The session's ``fork=`` option (plain data: it travels in ``RunOptions``)."""
        return {"rollout": self.rollout, "turn": self.turn, "strict": strict,
                "replace_seq": self.replace_seq, "replace_text": self.replace_text}


def agent_turns(record: RolloutRecord) -> list[Interaction]:
    """A rollout's model requests in order (its reward's judge calls and a tool's own HTTP
    calls are not turns)."""
    return sorted((i for i in record.interactions
                   if i.stage != "reward" and i.kind != TOOL_HTTP), key=lambda i: i.seq)


def rollout_fingerprint(record: RolloutRecord) -> str:
    """A content hash of one recorded rollout — its requests, replies, tool calls and reward —
    the same however the file holding it is stored (``compact``, ``merge``, zstd)."""
    digest = hashlib.sha256()
    for inter in sorted(record.interactions, key=lambda i: i.seq):
        digest.update(json.dumps([inter.seq, inter.request.get("body"), inter.response.get(
            "body")], sort_keys=True, default=str).encode())
    for call in sorted(record.tool_calls, key=lambda c: c.seq):
        digest.update(json.dumps([call.seq, call.name, call.arguments, call.result],
                                 sort_keys=True, default=str).encode())
    digest.update(json.dumps(record.outcome.get("reward"), default=str).encode())
    return digest.hexdigest()[:16]


def plan_fork(parent: Cassette, rollout: str, turn: int,
              replace: tuple[int, str] | None = None) -> ForkPlan:
    """Check that ``rollout`` of ``parent`` can be forked at ``turn`` (see the module)."""
    path = parent.path
    record = parent.rollouts.get(rollout)
    if record is None:
        known = [r for r, rec in parent.rollouts.items() if agent_turns(rec)]
        shown = ", ".join(known[:8]) + (" …" if len(known) > 8 else "")
        raise ForkError(f"the cassette has no rollout {rollout!r} (it has {shown or 'none'})",
                        cassette=path, rollout=rollout, turn=turn,
                        hint=f"`hermes-replay ls {path}` lists its rollouts and turns")
    # a plain env's group is one ``n>1`` request; its choices' rollouts carry no traffic
    if record.outcome.get("kind") == "group" or (
            "choice" in record.outcome and not agent_turns(record)):
        raise _one_request(path, rollout, turn, "a plain BaseEnv's group: one request "
                           "answered every rollout of it at once")
    turns = agent_turns(record)
    if len(turns) <= 1:
        raise _one_request(path, rollout, turn, f"it is {len(turns)} model request")
    if not 2 <= turn <= len(turns):
        raise ForkError(
            f"turn {turn} is beyond the rollout: it has {len(turns)} turns, and a fork "
            f"continues live from turn 2..{len(turns)} (turn 1 has no recorded prefix)",
            cassette=path, rollout=rollout, turn=turn,
            hint=f"pick --turn 2..{len(turns)} (`hermes-replay show {path} --rollout "
            f"{rollout}` numbers them); to start over, re-record with `hermes-replay record`")
    agent_calls = [c for c in record.tool_calls if c.source == "agent"]
    seen = turns[turn - 1].request.get("body", {}).get("messages") or []
    if any(isinstance(m, dict) and m.get("role") == "tool" for m in seen) and \
            not any(c.turn < turn - 1 for c in agent_calls):
        raise ForkError(
            f"the model saw tool results before turn {turn}, but the cassette holds none of "
            "its tool calls: the env ran its tools outside `hermes_replay.tool_call`, so the "
            "sandbox as it stood at that turn cannot be rebuilt and the env cannot resume there",
            cassette=path, rollout=rollout, turn=turn,
            hint="route the env's tools through hermes_replay.tool_call (the Hermes agent "
            "loop does) and re-record, then fork")
    plan = ForkPlan(path, rollout, turn, len(turns), rollout_fingerprint(record))
    if replace is None:
        return plan
    at, text = replace
    if at != turn:
        raise ForkError(f"--replace-message names turn {at}, but the fork starts at turn "
                        f"{turn}: only what the model sees at the fork's own turn is replaced",
                        cassette=path, rollout=rollout, turn=turn,
                        hint=f"write --replace-message {turn}=TEXT")
    target = _replaced_call(agent_calls, turn)
    last = seen[-1].get("role") if seen and isinstance(seen[-1], dict) else None
    if target is None or last != "tool":
        raise ForkError(
            f"turn {turn}'s request ends with a {last or 'no'} message, not a tool result: "
            "--replace-message changes the result of the tool call the model sees last at "
            "that turn (a user message is the env's own text: edit the env instead)",
            cassette=path, rollout=rollout, turn=turn,
            hint="fork at a turn that follows a tool call (`hermes-replay show` shows them)")
    return ForkPlan(path, rollout, turn, len(turns), plan.fingerprint, target.seq, text)


def _replaced_call(agent_calls: list[ToolCall], turn: int) -> ToolCall | None:
    """The last recorded agent call answering turn K-1: the tool result the model sees last
    in turn K's request."""
    before = [c for c in agent_calls if c.turn == turn - 2]
    return max(before, key=lambda c: c.seq) if before else None


def _one_request(path: Path, rollout: str, turn: int, what: str) -> ForkError:
    return ForkError(
        f"nothing to fork: rollout {rollout} is one request ({what}), so there is no turn to "
        "continue from", cassette=path, rollout=rollout, turn=turn,
        hint="fork a multi-turn rollout (a Hermes env's agent loop); a one-request rollout is "
        "re-recorded whole: `hermes-replay record ENV --missing-only …`")


def fork_link(plan: ForkPlan, branch: Path, *, sample: int | None = None,
              samples: int = 1) -> dict[str, Any]:
    """The branch header's ``fork`` field: its parent (path relative to the branch's folder,
    so the pair can move together), rollout, turn and the parent rollout's fingerprint."""
    parent = os.path.relpath(plan.cassette.resolve(), branch.resolve().parent)
    link: dict[str, Any] = {"parent": Path(parent).as_posix(), "rollout": plan.rollout,
                            "turn": plan.turn, "parent_fingerprint": plan.fingerprint}
    if plan.replace_seq is not None:
        link["replaced"] = {"turn": plan.turn, "tool_call": plan.replace_seq}
    if samples > 1 and sample is not None:
        link["sample"] = f"{sample}/{samples}"
    return link
