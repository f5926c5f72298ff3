"""The fixed CPU cost of one replay's env CLI, with ``_runner.fast_cli`` (and the flag check on
atroposlib's own parser) on and off, side by side in one process.

    .venv/bin/python benchmarks/cli_cost_bench.py [--reps 6]

The project is ``watch_bench``'s (the shipped cassettes and env files in a temporary folder);
the stack is imported once and each replay of ``multi_signal_env/process.jsonl`` runs the way a
fork of ``watch``'s warm process runs it (``replay_in_child``), so what is measured is a warm
process's steady state: the per-run CPU (``time.process_time``) of the replay. "off" runs with
the patches replaced by no-ops and the flag check building a parser of its own, as before;
"on" and "off" alternate ABBA, so load from other processes hits both alike. Printed: each
side's median, their difference and ratio, and whether the two sides' rewards agree.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import watch_bench  # (the benchmark folder, put on sys.path above)

from hermes_replay._runner.fast_cli import switched_off


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=6, help="runs per side (default 6)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cli-cost-bench-") as tmp:
        return _measure(Path(tmp), args.reps)


def _measure(tmp: Path, reps: int) -> int:
    project = watch_bench.make_project(tmp / "project")
    os.chdir(project)
    from hermes_replay._corpus.watch_run import STACK, replay_in_child
    from hermes_replay._runner.options import RunOptions
    from hermes_replay._runner.warm import _purge_user_modules

    for name in STACK:
        importlib.import_module(name)
    cassette = str(project / "cassettes/multi_signal_env/process.jsonl")
    count = iter(range(10**6))

    def once() -> tuple[float, dict[str, float | None]]:
        _purge_user_modules([project])
        start = time.process_time()
        done = replay_in_child(cassette, str(tmp / f"out{next(count)}"), str(project),
                               dict(os.environ), [str(project)], RunOptions())
        took = time.process_time() - start
        if done.summary.error or done.summary.misses:
            raise SystemExit(f"the replay failed:\n{done.printed}")
        return took, done.rewards

    for _ in range(2):  # the first runs compile and import what the stack did not
        once()
        with switched_off():
            once()
    got: dict[str, list[float]] = {"on": [], "off": []}
    rewards: dict[str, dict[str, float | None]] = {}
    order = ["on", "off", "off", "on"]
    for i in range(reps * 2):
        side = order[i % 4]
        with switched_off() if side == "off" else contextlib.nullcontext():
            took, rewards[side] = once()
        got[side].append(took)
    on, off = statistics.median(got["on"]), statistics.median(got["off"])
    print(f"per-run CPU of one replay (median of {reps}, ABBA): on {on * 1000:.1f} ms · "
          f"off {off * 1000:.1f} ms · saved {(off - on) * 1000:.1f} ms · "
          f"off/on {off / on:.2f}x (load average {os.getloadavg()[0]:.1f})")
    same = rewards["on"] == rewards["off"]
    print(f"{'PASS' if same else 'FAIL'}  rewards equal with and without the patches")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
