"""The page's data: one JSON document built from the report's sections.

Shape (read by ``static/report.js``; every text a cassette supplied is in ``strings`` or a
plain field, and the page only ever sets it as text, never as markup)::

    {"title", "generated", "version", "subject", "against", "compared": bool,
     "sections": [{"title", "run", "baseline", "notes", "summary": {...},
                   "charts": {"rewards": FIG, "groups": FIG}, "metrics": [[name, a, b]],
                   "wandb": [[name, a, b]]}],
     "rows": [{"key", "section", "id", "label", "parts", "note", "phase", "group", "reward",
               "before", "delta", "turns", "calls", "errors", "finished", "misses", "drift",
               "status"}],
     "transcripts": {key: {"messages": [...], "misses": [...], "diverge": {...} | None,
                           "tools": [recorded tool calls],
                           "tokens": {"ids", "trained", "logprobs"?} | None}},
     "strings": [...], "vocab": {id: text}}

FIG is a plotly figure as JSON (``_charts``), drawn by the plotly.js inlined in the page.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from hermes_replay._cassette.forks import fork_line
from hermes_replay._cassette.parts import parts_text
from hermes_replay._diff.compare import first_divergence
from hermes_replay._diff.tool_calls import first_tool_divergence
from hermes_replay._report._sources import Run, Section
from hermes_replay._report._tokens import TokenView, match_groups
from hermes_replay._report._transcript import (
    Strings,
    misses_by_rollout,
    recorded_tool_calls,
    transcript,
)

__all__ = ["build_state"]

_TOL = 1e-9


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _plain(value: Any) -> Any:
    """A metric value the page can show: numbers as numbers, anything else as short text."""
    number = _num(value)
    if number is not None:
        return number
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=repr)
    return text[:300]


def _paired(a: dict[str, Any], b: dict[str, Any] | None) -> list[list[Any]]:
    names = sorted(set(a) | set(b or {}))
    return [[n, _plain(a[n]) if n in a else None,
             _plain((b or {})[n]) if b is not None and n in b else None] for n in names]


def _divergences(run: Run, base: Run | None) -> dict[str, dict[str, Any]]:
    """First diverging turn per rollout, when both sides are recordings (transcripts)."""
    if base is None or run.kind != "cassette" or base.kind != "cassette" or not base.records:
        return {}
    out = {}
    for rid in sorted(set(run.records) & set(base.records)):
        before = sorted(base.records[rid].interactions, key=lambda i: i.seq)
        after = sorted(run.records[rid].interactions, key=lambda i: i.seq)
        found = first_divergence(rid, before, after)
        if found is not None:
            # Divergence.turn counts from 1; the model keeps 0-based seqs (shown + 1)
            out[rid] = {"turn": found.turn - 1, "field": found.field, "diff": found.diff[:6000]}
            continue
        tools = first_tool_divergence(rid, base.records[rid].tool_calls,
                                      run.records[rid].tool_calls)
        if tools is not None:  # the same conversation, but a tool answered differently
            turn, where, diff = tools
            # turn None: a call the reward made (it answers no turn of the conversation)
            out[rid] = {"turn": None if turn is None else turn - 1, "field": where,
                        "diff": diff[:6000]}
    return out


def _unused_by_rollout(unused: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in unused:
        rid = key.rsplit("#", 1)[0]
        counts[rid] = counts.get(rid, 0) + 1
    return counts


def _status(row: dict[str, Any], compared: bool) -> str:
    if row["misses"]:
        return "miss"
    if compared and row["reward"] is None and row["before"] is not None and not row["in_run"]:
        return "only before"
    if compared and row["before"] is None and not row["in_base"]:
        return "new"
    if row["delta"] is not None and abs(row["delta"]) > _TOL:
        return "changed"
    if (row["reward"] is None) != (row["before"] is None) and compared:
        return "changed"
    if row["drift"]:
        return "drift"
    return "same" if compared else ""


def _changed(row: dict[str, Any]) -> bool:
    """A reward that moved, or a rollout on one side only — whatever else (a miss) it shows."""
    return row["status"] in ("changed", "new", "only before") or (
        row["delta"] is not None and abs(row["delta"]) > _TOL)


def _when(turn: int | None) -> str:
    return "the reward" if turn is None else f"turn {turn + 1}"


def _attribution_note(record: Any, *runs: Run | None) -> str | None:
    """What the reward of a plain env's rollout is not plainly (dropped, ambiguous, given by
    position), as ``show`` and the snapshots say it; None for a Hermes rollout. ``runs``: where
    its group's record (``outcome.traffic``) may be, for its scores."""
    from hermes_replay._cassette.choices import attribution_note

    outcome = getattr(record, "outcome", None)
    if not isinstance(outcome, dict) or not outcome.get("traffic"):
        return None
    group = next((r.records[str(outcome["traffic"])] for r in runs
                  if r is not None and str(outcome["traffic"]) in r.records), None)
    return attribution_note(outcome, group.outcome if group is not None else None)


def _section_rows(si: int, section: Section, state: dict[str, Any], strings: Strings
                  ) -> list[dict[str, Any]]:
    run, base = section.run, section.baseline
    compared = base is not None
    divergences = _divergences(run, base)
    misses = misses_by_rollout(run.misses)
    unused = _unused_by_rollout(run.unused)
    tokens = match_groups(run.cassette, run.scored_groups)
    view = TokenView(run.cassette) if tokens else None
    ids = sorted(set(run.rollouts) | (set(base.rollouts) if base else set()))
    rows = []
    for rid in ids:
        after = run.rollouts.get(rid)
        before = base.rollouts.get(rid) if base else None
        record = run.records.get(rid) or (base.records.get(rid) if base else None)
        scored = tokens[rid]["messages"] if rid in tokens else None
        messages, calls, errors = (transcript(record, strings, scored) if record
                                   else ([], 0, 0))
        shown = after or before
        assert shown is not None
        reward = _num(after.reward) if after else None
        previous = _num(before.reward) if before else None
        drift = divergences.get(rid)
        drift_text = (f"{_when(drift['turn'])}: {drift['field']}" if drift else
                      f"{unused[rid]} recording(s) unused" if rid in unused else None)
        key = f"{si}:{rid}"
        tool_errors = shown.tool_errors if shown.tool_errors is not None else errors
        row = {
            "key": key, "section": si, "id": rid,
            "label": (after.label if after else None) or (before.label if before else None),
            "parts": parts_text(shown.parts) or None,
            "note": _attribution_note(record, run, base),
            "phase": shown.phase,
            "group": run.groups_of.get(rid) or (base.groups_of.get(rid) if base else None),
            "reward": reward, "before": previous,
            "delta": None if reward is None or previous is None else reward - previous,
            "turns": shown.turns, "calls": calls, "errors": tool_errors,
            "finished": shown.finished, "misses": len(misses.get(rid, [])),
            "drift": drift_text, "in_run": after is not None, "in_base": before is not None,
        }
        row["status"] = _status(row, compared)
        del row["in_run"], row["in_base"]
        rows.append(row)
        state["transcripts"][key] = {
            "messages": messages, "misses": misses.get(rid, []), "diverge": drift,
            "tools": recorded_tool_calls(record.tool_calls, strings) if record else [],
            "tokens": view.entry(tokens[rid]) if view is not None and rid in tokens else None,
        }
        if view is not None:
            state["vocab"].update({str(k): v for k, v in view.vocab.items()})
    return rows


def build_state(sections: list[Section], *, subject: str, against: str | None,
                charts: Any) -> dict[str, Any]:
    """Everything the page shows; ``charts`` is the ``_charts`` module (plotly, an extra)."""
    from hermes_replay import __version__

    strings = Strings()
    state: dict[str, Any] = {
        "title": f"hermes-replay report · {subject}" + (f" against {against}" if against else ""),
        "generated": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "version": __version__, "subject": subject, "against": against,
        "compared": any(s.baseline is not None for s in sections),
        "sections": [], "rows": [], "transcripts": {}, "strings": strings.values, "vocab": {},
    }
    for si, section in enumerate(sections):
        rows = _section_rows(si, section, state, strings)
        state["rows"].extend(rows)
        run, base = section.run, section.baseline
        notes = list(section.notes)
        branch = fork_line(run.cassette.header) if run.cassette is not None else None
        if branch is not None:  # a fork's branch: its parent, named once at the top
            notes.insert(0, branch)
        if not run.complete:
            notes.append(f"{run.label} is an interrupted recording (.partial)")
        if run.misses:
            notes.append(f"{len(run.misses)} replay miss(es): the run asked for requests the "
                         "cassette does not hold")
        outside = misses_by_rollout(run.misses).get("")
        if outside:
            notes.extend(m["text"].splitlines()[0] for m in outside[:5])
        state["sections"].append({
            "title": section.title, "run": run.label, "baseline": base.label if base else None,
            "notes": notes,
            "summary": {
                "rollouts": len(rows),
                "mean": _mean([r["reward"] for r in rows]),
                "mean_before": _mean([r["before"] for r in rows]) if base else None,
                "changed": sum(1 for r in rows if _changed(r)),
                "misses": len(run.misses), "unused": len(run.unused),
            },
            "charts": charts.section_charts(section.title, rows, compared=base is not None),
            "metrics": _paired(run.eval_metrics, base.eval_metrics if base else None),
            "wandb": _paired(run.wandb, base.wandb if base and base.wandb else None),
        })
    return state
