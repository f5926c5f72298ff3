"""``hermes-replay diff A B [--json] [--tolerance T] [--limit N]`` — what changed between runs.

A and B are each a cassette (``.jsonl``), a replay result (``result.json``, written by
``hermes_replay._runner.result_io.write_run_result``, or a folder holding one), or an ``evaluate``
output folder (its ``metrics.json`` + ``samples.jsonl``). A is the old side, B the new.

Shown: per-rollout reward changes (A → B, delta) and other outcome changes, rollouts only in
A / only in B, the first diverging turn of each transcript and the first differing recorded
tool call of each rollout (two cassettes), and metric deltas. Colors only on a terminal and
never with NO_COLOR.

``--json`` prints one document instead (``schema_version`` 1)::

    {"schema_version", "equal", "a": {"path","kind","env_name","rollouts","misses"}, "b": {…},
     "compared_rollouts", "rewards": [{"rollout","phase","a","b","delta","fields"}],
     "only_in_a": [ids], "only_in_b": [ids],
     "divergences": [{"rollout","turn","field","diff","changes": [{"field","lines"}]}],
     "tool_divergences": [{"rollout","turn","field","diff"}],   # first differing tool call
     "metrics": [{"name","a","b","delta"}], "notes": [str]}

A reward or metric that is not a finite number is the string ``"NaN"``, ``"Infinity"`` or
``"-Infinity"`` there (strict JSON has no such numbers), and its ``delta`` is null.

Exit codes: 0 equal, 1 they differ, 2 usage errors (an unreadable input says which and why).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from hermes_replay._cassette.matching import field_report
from hermes_replay._terminal.render import Style, fmt_reward, sanitize, table

DEFAULT_LIMIT = 5


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two cassettes or replay results: rewards, transcripts, metrics",
        description="Compare A (old) with B (new): per-rollout reward changes, rollouts only "
        "in one side, the first diverging turn of each transcript, metric deltas. Each side "
        "is a cassette, a result.json (or a folder holding one), or an evaluate output folder.",
        epilog="exit codes: 0 equal, 1 they differ, 2 usage errors (e.g. an unreadable input)",
    )
    p.add_argument("a", metavar="A", type=Path, help="old side: cassette, result.json or folder")
    p.add_argument("b", metavar="B", type=Path, help="new side: cassette, result.json or folder")
    p.add_argument("--json", action="store_true", help="print a JSON document (for CI; every "
                   "diverging field)")
    p.add_argument("--tolerance", type=float, default=1e-9, metavar="T",
                   help="rewards and metrics closer than T count as equal (default 1e-9)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every diverging field of a turn in full (default: the first three, "
                   "the rest counted by name)")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"show the diff of at most N diverging transcripts (default "
                   f"{DEFAULT_LIMIT}; 0 = all); the rest are listed by name")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay import CassetteError
    from hermes_replay._diff.compare import compare_paths

    if args.tolerance < 0:
        print("hermes-replay diff: --tolerance must be 0 or more", file=sys.stderr)
        return 2
    try:
        report = compare_paths(args.a, args.b, tolerance=args.tolerance)
    except CassetteError as exc:
        print(f"hermes-replay diff: {exc}", file=sys.stderr)
        return 2
    from hermes_replay._cassette.display import (
        DisplayRefused,
        display_json,
        display_scope,
        display_text,
    )

    source = f"{args.a} {args.b}"
    try:
        with display_scope():  # scrubbed as the report scrubs (``_cassette.display``)
            if args.json:
                text = json.dumps(display_json(report.to_json(), source), indent=2,
                                  ensure_ascii=False, allow_nan=False)
            else:
                text = display_text("\n".join(render_report(
                    report, Style(sys.stdout), limit=args.limit, verbose=args.verbose)), source)
    except DisplayRefused as exc:
        print(f"hermes-replay diff: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0 if report.equal else 1


# --------------------------------------------------------------------------- rendering


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
            rows.append([c.rollout, c.phase, fmt_reward(c.reward_a), fmt_reward(c.reward_b),
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
            out.append(f"  {style(d.rollout, 'bold')} · turn {d.turn} · {d.field}")
            lines = (["--- A", "+++ B", *field_report(d.changes, verbose=verbose,
                                                      more_hint="-v shows all")]
                     if d.changes else d.diff.splitlines())
            out.extend("    " + line for line in _diff_lines("\n".join(lines), style))
        rest = report.divergences[len(shown):]
        if rest:
            out.append(f"  … {len(rest)} more: "
                       + _ids([f"{d.rollout}#{d.turn}" for d in rest])
                       + " (--limit 0 shows all)")
    if report.tool_divergences:
        out += ["", style(f"first differing tool call: {len(report.tool_divergences)} "
                          "rollout(s)", "bold", "yellow")]
        shown = report.tool_divergences if limit <= 0 else report.tool_divergences[:limit]
        for d in shown:
            out.append(f"  {style(d.rollout, 'bold')} · after turn {d.turn} · {d.field}")
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
