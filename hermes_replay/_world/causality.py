"""Whether a rollout's agent side replayed exactly — the condition for believing a recorded
reward-side tool result.

A reward-side call (``ToolContext``: ``cat answer.txt``, ``pytest`` in the sandbox) reads a
world every earlier agent action built. Its recorded answer describes *that* world, so replay
may serve it only while the rollout's agent side is the recorded one: every recorded agent
tool call made again, same name and arguments, turn by turn, none extra, and every model
request matched. Calls of one turn may run concurrently, so within a turn they are compared as
a multiset; turns are compared in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from hermes_replay._cassette.toolcalls import ToolCall

__all__ = ["AgentAction", "first_difference", "unbuilt_world"]

AgentAction = tuple[int, str, Any, str]  # (turn, name, arguments, canonical request)


def _shown(name: str, arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{name} {text}"


def first_difference(recorded: Iterable[ToolCall], made: Iterable[AgentAction],
                     canon: Callable[[dict[str, Any]], str]) -> str | None:
    """The first agent action that differs (``"turn 2: recorded X → now Y"``), or None."""
    by_turn_rec: dict[int, list[tuple[str, str]]] = {}
    for call in sorted(recorded, key=lambda c: c.seq):
        by_turn_rec.setdefault(call.turn, []).append(
            (canon(call.request()), _shown(call.name, call.arguments)))
    by_turn_now: dict[int, list[tuple[str, str]]] = {}
    for turn, name, arguments, key in made:
        by_turn_now.setdefault(turn, []).append((key, _shown(name, arguments)))
    for turn in sorted(set(by_turn_rec) | set(by_turn_now)):
        rec = sorted(by_turn_rec.get(turn, []))
        now = sorted(by_turn_now.get(turn, []))
        if [k for k, _ in rec] == [k for k, _ in now]:
            continue
        made_now = {k for k, _ in now}
        made_then = {k for k, _ in rec}
        missing = [shown for k, shown in rec if k not in made_now]
        extra = [shown for k, shown in now if k not in made_then]
        label = f"turn {turn + 1}"
        if missing and extra:
            return f"{label}: recorded {missing[0]} → now {extra[0]}"
        if missing:
            return f"{label}: recorded {missing[0]} → now not called"
        if extra:
            return f"{label}: now {extra[0]}, which the recording never made"
        return f"{label}: a tool call made a different number of times than recorded"
    return None


def unbuilt_world(rollout: str, difference: str, call: str) -> str:
    """The reason a reward-side call is not answered from the recording."""
    return (f"the agent side of rollout {rollout!r} did not replay exactly ({difference}), so "
            f"the recorded answer of this reward call ({call}) describes a world this run's "
            "agent never built; it is not served. Next step: if the change is intended, "
            "re-record the rollout whole (`hermes-replay record … --missing-only`); to score "
            "the agent's new actions for real, run them (`--tools execute`)")
