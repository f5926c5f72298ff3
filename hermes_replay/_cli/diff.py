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
import sys
from pathlib import Path
from typing import Any

from hermes_replay._diff.render import DEFAULT_LIMIT, render_report
from hermes_replay._terminal.render import Style


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
