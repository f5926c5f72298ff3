"""``hermes-replay report PATH [--against OTHER] [-o report.html]`` — one HTML page.

PATH and OTHER: a cassette, a folder of cassettes, a replay output folder, or a result.json.
``--against`` is the "before": each run is compared with the run of the same environment and
mode there. A replay output folder alone is compared with the recordings it replayed.

Exit codes: 0 written; 1 refused (a secret survives redaction); 2 bad input, an output path
that is not a report, or the ``report`` extra is not installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML page of rollouts, rewards and what changed",
        description="Charts of the reward distribution and per-group spread, a sortable table "
        "of rollouts, and each rollout's transcript (tool calls, errors, misses, the first "
        "diverging turn, training tokens) in one HTML file that opens with no network.",
        epilog="exit codes: 0 written; 1 refused (a secret survives redaction); 2 bad input "
        "or the 'report' extra missing (pip install 'hermes-replay[report]')",
    )
    p.add_argument("path", metavar="PATH", type=Path,
                   help="a cassette, a folder of cassettes, a replay output folder or result.json")
    p.add_argument("--against", metavar="OTHER", type=Path,
                   help="compare with this (the 'before'): a cassette, folder or replay output")
    p.add_argument("-o", "--out", metavar="FILE", type=Path, default=Path("report.html"),
                   help="where to write the page (default: ./report.html)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay import CassetteError, HermesReplayError
    from hermes_replay._report import ReportRefused, report_unavailable, write_report

    missing = report_unavailable()
    if missing is not None:
        print(f"hermes-replay report: {missing}", file=sys.stderr)
        return 2
    try:
        path = write_report(args.path, args.out, against=args.against)
    except ReportRefused as exc:
        print(f"hermes-replay report: {exc}", file=sys.stderr)
        return 1
    except (CassetteError, HermesReplayError) as exc:
        print(f"hermes-replay report: {exc}", file=sys.stderr)
        return 2
    size = path.stat().st_size / 1e6
    print(f"report: {path} ({size:.1f} MB; open it in a browser, no network needed)")
    return 0
