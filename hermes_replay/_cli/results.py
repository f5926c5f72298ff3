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

from hermes_replay._cli._manifest import Manifest, ManifestRow, read_manifest
from hermes_replay._cli._shard import Shard, parse_shard, shard_of
from hermes_replay._terminal.render import Style

_SHOWN = 20  # missing cassettes named one per line; the rest counted


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

    manifests: list[Manifest] = []
    for folder in args.outs:
        try:
            manifests.append(read_manifest(folder))
        except CassetteError as exc:
            print(f"hermes-replay results: {exc}", file=sys.stderr)
            return 2
    style = Style(sys.stdout)
    rows, problems = join(manifests)
    from hermes_replay._cli.replay import _exit_code, _final_table, _Row

    table_rows = [_Row(r.cassette, r.mode, r.summary) for r in rows]
    print(_final_table(table_rows, style))
    corpus = _corpus(manifests)
    print(f"{len(rows)} of {len(corpus)} cassettes replayed, from {len(manifests)} out "
          f"folder(s)")
    for line in problems:
        print(style("problem: ", "red") + line)
    if args.report:
        print(_report_line(args.outs, args.out))
    code = _exit_code([r.summary for r in rows], args.fail_on_change)
    if problems:
        code = 1
    if any(r.summary.changed for r in rows) and not code:
        print("rewards changed (shown above); pass --fail-on-change to make that exit 1")
    return code


def _corpus(manifests: list[Manifest]) -> list[str]:
    """Every cassette any shard saw in the corpus, in the corpus' order."""
    seen: dict[str, None] = {}
    for m in manifests:
        seen.update(dict.fromkeys(m.corpus_cassettes))
    return list(seen)


def join(manifests: list[Manifest]) -> tuple[list[ManifestRow], list[str]]:
    """The rows of all ``manifests`` in the corpus' order, and what keeps them from being
    one complete replay (cassettes no shard replayed, shards missing or stopped early,
    cassettes replayed twice, shards of different corpora)."""
    problems: list[str] = []
    corpus = _corpus(manifests)
    listings = {tuple(m.corpus_cassettes) for m in manifests}
    if len(listings) > 1:
        problems.append(f"the out folders saw {len(listings)} different corpora (cassettes "
                        "added or removed between the shard jobs?); expected is their union")
    by_rel: dict[str, ManifestRow] = {}
    where: dict[str, Path | None] = {}
    for m in manifests:
        if not m.complete:
            problems.append(f"{m.path}: shard {m.shard or '(all)'} stopped before its end "
                            "(Ctrl-C, SIGTERM or a time limit); replay it again")
        for row in m.rows:
            if row.rel in by_rel:
                problems.append(f"{row.rel} was replayed by {where[row.rel]} and by {m.path}; "
                                "showing the first (two runs of the same shard?)")
                continue
            by_rel[row.rel] = row
            where[row.rel] = m.path
    problems.extend(_shard_gaps(manifests))
    missing = [rel for rel in corpus if rel not in by_rel]
    if missing:
        count = _shard_count(manifests)
        lines = [f"  {rel}" + (f" (shard {shard_of(rel, count)}/{count})" if count else "")
                 for rel in missing[:_SHOWN]]
        more = f"\n  … and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        problems.append(f"{len(missing)} cassette(s) replayed by no shard:\n"
                        + "\n".join(lines) + more)
    order = {rel: i for i, rel in enumerate(corpus)}
    rows = sorted(by_rel.values(), key=lambda r: order.get(r.rel, len(order)))
    return rows, problems


def _shards(manifests: list[Manifest]) -> list[Shard]:
    return [parse_shard(m.shard) for m in manifests if m.shard]


def _shard_count(manifests: list[Manifest]) -> int | None:
    counts = {s.count for s in _shards(manifests)}
    return counts.pop() if len(counts) == 1 else None


def _shard_gaps(manifests: list[Manifest]) -> list[str]:
    shards = _shards(manifests)
    counts = {s.count for s in shards}
    if len(counts) > 1:
        splits = ", ".join(f"of {n}" for n in sorted(counts))
        return [f"the out folders are shards of different splits ({splits}): a cassette's "
                "shard depends on N, so they need not cover the corpus; replay every shard "
                "with the same N"]
    if not shards:
        return []
    count = counts.pop()
    absent = sorted(set(range(1, count + 1)) - {s.index for s in shards})
    if not absent:
        return []
    return [f"no out folder of shard(s) {', '.join(f'{i}/{count}' for i in absent)} among "
            "the ones given (a job that did not run or did not finish?)"]


def _report_line(outs: list[Path], target: Path) -> str:
    from hermes_replay._report import report_unavailable, write_report

    missing = report_unavailable()
    if missing is not None:
        return f"report: not written ({missing})"
    from hermes_replay import HermesReplayError

    try:
        return f"report: {write_report(list(outs), target)}"
    except HermesReplayError as exc:
        return f"report: not written — {exc}"
