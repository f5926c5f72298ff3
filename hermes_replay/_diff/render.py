"""A ``DiffReport`` as the lines ``hermes-replay diff`` prints: a line per side, the reward
changes as a table, rollouts on one side only, the first diverging turn of each transcript
(its fields' diffs, the first ``limit`` unless ``verbose``), the first differing tool call,
metric deltas and a verdict. Plain text colored by the caller's ``Style``.
"""

from __future__ import annotations

import math
from typing import Any

from hermes_replay._cassette.labels import named
from hermes_replay._cassette.matching import field_report
from hermes_replay._terminal.render import Style, fmt_reward, sanitize, table

__all__ = ["DEFAULT_LIMIT", "render_report"]

DEFAULT_LIMIT = 5


def _signed(value: float | None, style: Style, digits: int = 3) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return _metric(value)
    text = f"{value:+.{digits}f}"
    return style(text, "green" if value > 0 else "red") if value else text


def _metric(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):  # a NaN reward is data to show, not a crash
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value == int(value) and abs(value) < 1e9:
        return str(int(value))
    return f"{value:.4f}"


def _side_line(name: str, view: Any) -> str:
    facts = [view.kind]
    if view.env_name:
        facts.append(view.env_name)
    facts.append(f"{len(view.rollouts)} rollouts")
    if view.transcripts is not None:
        facts.append(f"{view.turn_count} turns")
    # the env name and label come from the cassettes: shown escaped, never as terminal codes
    return sanitize(f"  {name}  {view.label}  ({' · '.join(facts)})")


def _ids(ids: list[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" … and {len(ids) - limit} more" if len(ids) > limit else "")


def _id_lines(ids: list[str], limit: int = 8) -> list[str]:
    out = ["  " + i for i in ids[:limit]]
    if len(ids) > limit:
        out.append(f"  … and {len(ids) - limit} more (--json lists all)")
    return out


def _diff_lines(diff: str, style: Style) -> list[str]:
    out = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            out.append(style(line, "bold"))
        elif line.startswith("-"):
            out.append(style(line, "red"))
        elif line.startswith("+"):
            out.append(style(line, "green"))
        elif line.startswith("@@"):
            out.append(style(line, "cyan"))
        else:
            out.append(line)
    return out


def _name(report: Any, rollout: str) -> str:
    """``id (label)`` — the rollout's item named beside its id (``_cassette/labels.py``)."""
    return sanitize(named(rollout, report.name_of(rollout)))


def render_report(report: Any, style: Style, *, limit: int = DEFAULT_LIMIT,
                  verbose: bool = False) -> list[str]:
    """The terminal form of a ``DiffReport``: sides, rollouts, transcripts, metrics, verdict."""
    out = [style("hermes-replay diff", "bold"), _side_line("A", report.a),
           _side_line("B", report.b)]
    if report.changes:
        out += ["", style(f"rollouts: {len(report.changes)} of {report.compared_rollouts} "
                          "changed", "bold", "yellow")]
        rows = []
        for c in report.changes:
            other = ", ".join(f"{k} {_plain(x)} → {_plain(y)}" for k, (x, y) in c.fields.items())
            rows.append([_name(report, c.rollout), c.phase, fmt_reward(c.reward_a),
                         fmt_reward(c.reward_b),
                         _signed(c.delta, style) if c.reward_changed else "=", other])
        out.append(table(["rollout", "phase", "A", "B", "delta", "also changed"], rows,
                         align="llrrrl", style=style))
    for ids, side in ((report.only_a, "A"), (report.only_b, "B")):
        if ids:
            out += ["", style(f"only in {side}: {len(ids)} rollout(s)", "bold", "yellow")]
            out += _id_lines(ids)
    if report.divergences:
        out += ["", style(f"first diverging turn: {len(report.divergences)} transcript(s)",
                          "bold", "yellow")]
        shown = report.divergences if limit <= 0 else report.divergences[:limit]
        for d in shown:
            out.append(f"  {style(_name(report, d.rollout), 'bold')} · turn {d.turn} · {d.field}")
            lines = (["--- A", "+++ B", *field_report(d.changes, verbose=verbose,
                                                      more_hint="-v shows all")]
                     if d.changes else d.diff.splitlines())
            out.extend("    " + line for line in _diff_lines("\n".join(lines), style))
        rest = report.divergences[len(shown):]
        if rest:
            out.append(f"  … {len(rest)} more: "
                       + _ids([f"{d.rollout}#{d.turn}" for d in rest])
                       + " (--limit 0 shows all)")
    if report.request_misses:
        n = len(report.request_misses)
        out += ["", style(f"requests that differ from the recording: {n} (each against the "
                          "nearest recorded request)", "bold", "yellow")]
        shown = report.request_misses if limit <= 0 else report.request_misses[:limit]
        for text in shown:
            head, *rest = sanitize(text).splitlines() or [""]  # a result.json is input
            out.append("  " + style(head, "bold"))
            out.extend("    " + line for line in _diff_lines("\n".join(rest), style))
        if n > len(shown):
            out.append(f"  … {n - len(shown)} more (--limit 0 shows all)")
    if report.tool_divergences:
        out += ["", style(f"first differing tool call: {len(report.tool_divergences)} "
                          "rollout(s)", "bold", "yellow")]
        shown = report.tool_divergences if limit <= 0 else report.tool_divergences[:limit]
        for d in shown:
            when = "in the reward" if d.turn is None else f"after turn {d.turn}"
            out.append(f"  {style(_name(report, d.rollout), 'bold')} · {when} · {d.field}")
            out.extend("    " + line for line in _diff_lines(d.diff, style))
        if len(report.tool_divergences) > len(shown):
            out.append(f"  … {len(report.tool_divergences) - len(shown)} more (--limit 0 "
                       "shows all)")
    if report.metrics:
        out += ["", style(f"metrics: {len(report.metrics)} of {report.compared_metrics} "
                          "changed", "bold", "yellow")]
        rows = [[m.name, _metric(m.a), _metric(m.b), _signed(m.delta, style, 4)]
                for m in report.metrics]
        out.append(table(["metric", "A", "B", "delta"], rows, align="lrrr", style=style))
    for note in report.notes:
        out += ["", style("note: ", "dim") + note]
    out += ["", _verdict(report, style)]
    return out


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):  # a reward part: "correct 1 → 0", not "1.0 → 0.0"
        return f"{value:.4g}"
    if value is None:
        return "-"
    return str(value)


def _verdict(report: Any, style: Style) -> str:
    if report.equal:
        turns = (f", {report.a.turn_count} turns"
                 if report.a.transcripts is not None and report.b.transcripts is not None
                 else "")
        return style("no differences", "green", "bold") + (
            f" ({report.compared_rollouts} rollouts{turns}, {report.compared_metrics} "
            "metrics compared)")
    parts = []
    rewards = sum(1 for c in report.changes if c.reward_changed)
    if rewards:
        parts.append(f"{rewards} reward(s) changed")
    if len(report.changes) > rewards:
        parts.append(f"{len(report.changes) - rewards} other outcome change(s)")
    if report.only_a or report.only_b:
        parts.append(f"{len(report.only_a)} rollout(s) only in A, {len(report.only_b)} only in B")
    if report.divergences:
        parts.append(f"{len(report.divergences)} transcript(s) diverge")
    if report.tool_divergences:
        parts.append(f"{len(report.tool_divergences)} rollout(s) with a differing tool call")
    if report.metrics:
        parts.append(f"{len(report.metrics)} metric(s) changed")
    if report.a.misses or report.b.misses:
        parts.append("replay misses")
    return style("differences: ", "red", "bold") + "; ".join(parts)
