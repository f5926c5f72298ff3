"""``hermes-replay results OUT... [-o report.html] [--fail-on-change]`` — join the out folders
of shard jobs (``replay DIR --shard I/N``) into one table, one report and one exit code.

Each out folder's ``replay.json`` (``_manifest``) holds its rows and the corpus it saw, so the
join needs no access to the corpus itself. The joined run fails (exit 1) when any row fails
as ``replay`` would fail it, when a cassette of the corpus was replayed by no shard (named,
with its shard), or when a shard stopped before its end; a cassette replayed by two folders is
named and its first row kept.

Exit codes: 0 all replayed; 1 a failure, a cassette not replayed, a shard incomplete; 2 an
out folder that cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._corpus.join import corpus_of, join
from hermes_replay._corpus.manifest import Manifest, read_manifest
from hermes_replay._corpus.summary import exit_code
from hermes_replay._terminal.render import Style, sanitize


def register(sub: Any) -> None:
    p = sub.add_parser(
        "results",
        help="join the out folders of `replay --shard` jobs into one table, report and exit code",
        description="Read each OUT folder's replay.json (written by `hermes-replay replay "
        "DIR`, one per shard) and print one table of every cassette, name the cassettes no "
        "shard replayed, write one report.html of all of them, and exit as one replay would.",
        epilog="exit codes: 0 all replayed; 1 misses, errors, a cassette no shard replayed or "
        "a shard stopped early; 2 an out folder that cannot be read",
    )
    p.add_argument("outs", nargs="+", type=Path, metavar="OUT",
                   help="out folders of `hermes-replay replay DIR --shard I/N` (any number)")
    p.add_argument("-o", "--out", metavar="FILE", type=Path, default=Path("report.html"),
                   help="where to write the joined report (default: ./report.html)")
    p.add_argument("--no-report", dest="report", action="store_false",
                   help="do not write the HTML report")
    p.add_argument("--fail-on-change", action="store_true",
                   help="exit 1 when a reward differs from the recorded one")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay import CassetteError
    from hermes_replay._report import joined_report_line, unusable_target

    if args.report and (why := unusable_target(args.out)):  # before anything is read
        print(f"hermes-replay results: {why}", file=sys.stderr)
        return 2
    manifests: list[Manifest] = []
    for folder in args.outs:
        try:
            manifests.append(read_manifest(folder))
        except CassetteError as exc:
            print(f"hermes-replay results: {exc}", file=sys.stderr)
            return 2
    style = Style(sys.stdout)
    rows, problems = join(manifests)
    from hermes_replay._cli.replay import final_table

    print(final_table([(r.cassette, r.mode, r.summary) for r in rows], style))
    corpus = corpus_of(manifests)
    print(f"{len(rows)} of {len(corpus)} cassettes replayed, from {len(manifests)} out "
          f"folder(s)")
    for line in problems:  # names from the shards' files: escaped, never terminal codes
        print(style("problem: ", "red") + sanitize(line))
    if args.report:
        print(joined_report_line(args.outs, args.out))
    code = exit_code([r.summary for r in rows], args.fail_on_change)
    if problems:
        code = 1
    if any(r.summary.changed for r in rows) and not code:
        print("rewards changed (shown above); pass --fail-on-change to make that exit 1")
    return code

