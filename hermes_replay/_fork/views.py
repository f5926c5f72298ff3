"""A branch drawn beside its parent (``show``): the shared prefix said once, then the turns
after the fork turn by turn — the parent's and the branch's side by side — and both rewards.

Plain lines (``show`` styles and scrubs them as everything it prints). The parent is read as
data, found where the branch's link says (relative to the branch's folder); a parent that is
not there is named, never searched for.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_replay._cassette.forks import fork_of, parent_path
from hermes_replay._cassette.model import Cassette, Interaction, RolloutRecord
from hermes_replay._errors import CassetteError
from hermes_replay._fork.plan import agent_turns, rollout_fingerprint

__all__ = ["branch_lines", "load_parent", "turn_summary"]

_WIDTH = 58


def load_parent(branch: Cassette) -> tuple[Cassette | None, str | None]:
    """The branch's parent cassette, or None and why it could not be read."""
    from hermes_replay._cassette.load import load_cassette

    link = fork_of(branch.header)
    where = parent_path(branch.path, link) if link is not None else None
    if where is None:
        return None, "the link names no parent file"
    try:
        return load_cassette(where), None
    except CassetteError as exc:
        return None, f"the parent {where} could not be read ({exc.reason})"


def turn_summary(inter: Interaction) -> str:
    """One turn's reply in a line: its tool calls (a terminal call by its command), else
    its text."""
    body = inter.response.get("body")
    choices = body.get("choices") if isinstance(body, dict) else None
    message = choices[0].get("message", {}) if isinstance(choices, list) and choices \
        and isinstance(choices[0], dict) else {}
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if isinstance(calls, list) and calls:
        parts = []
        for call in calls:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            args = fn.get("arguments", "")
            try:
                parsed = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                parsed = args
            shown = parsed.get("command") if isinstance(parsed, dict) and "command" in parsed \
                else args
            parts.append(f"{fn.get('name', '?')} {shown}")
        text = "; ".join(parts)
    else:
        text = str(message.get("content") or "") if isinstance(message, dict) else ""
    text = " ".join(text.split())
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def branch_lines(branch: Cassette, record: RolloutRecord, parent: Cassette | None,
                 problem: str | None) -> list[str]:
    """The lines ``show`` adds under a forked rollout (see the module)."""
    link = fork_of(branch.header)
    if link is None or record.id != link["rollout"]:
        return []
    turn = link["turn"]
    mine = agent_turns(record)
    out = [f"── forked at turn {turn}: turns 1..{turn - 1} above are the parent's (replayed, "
           f"shown once); turns {turn}..{len(mine)} are this branch's (live) ──"]
    theirs = parent.rollouts.get(record.id) if parent is not None else None
    if theirs is None:
        out.append(f"  parent not shown: {problem or 'it has no rollout ' + record.id}")
        return out
    if rollout_fingerprint(theirs) != link.get("parent_fingerprint"):
        out.append("  note: the parent's rollout is not the one this branch was forked from "
                   "(its fingerprint differs: re-recorded since?)")
    before = agent_turns(theirs)
    out.append(f"  {'turn':<6} {'parent':<{_WIDTH}}  branch")
    for k in range(turn - 1, max(len(before), len(mine))):
        a = turn_summary(before[k]) if k < len(before) else "—"
        b = turn_summary(mine[k]) if k < len(mine) else "—"
        out.append(f"  {k + 1:<6} {a:<{_WIDTH}}  {b}")
    out.append(f"  {'reward':<6} {_num(theirs.outcome.get('reward')):<{_WIDTH}}  "
               f"{_num(record.outcome.get('reward'))}")
    return out


def _num(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{float(value):.3f}"
