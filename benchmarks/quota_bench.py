"""How far past its workspace quota a write loop gets before it is killed: the quota warden (a
process of its own) side by side with the harness counting in one of its own threads.

    python benchmarks/quota_bench.py                  # 8 runs each, quiet machine
    python benchmarks/quota_bench.py --load 3 --gil   # beside 3 busy processes and a harness
                                                      # thread that keeps taking the GIL

The command is the isolation test's: ``head -c 4M`` files in a loop against a 24 MiB quota,
under real bubblewrap. ``--gil`` runs a pure-Python loop in a thread of this process while the
command runs — what a harness does while other rollouts' agent loops, parsers and tokenizers
run. Prints each mode's sizes on disk when the command was stopped, and the ratio of medians.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid

from environments.tools.sandbox import _bwrap, _warden, cleanup_sandbox, get_sandbox
from environments.tools.sandbox._limits import SandboxLimits

MiB = 1024**2
QUOTA = 24 * MiB
LOOP = "i=0; while :; do head -c 4M /dev/zero > f$i.bin; i=$((i+1)); done"


def _burn() -> None:
    while True:
        pass


def _gil_loop(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        x += 1


class _NoWarden(_warden.Warden):
    """A warden that cannot start: the sandbox counts in the harness thread (its fallback)."""

    def _start(self) -> None:
        self._proc = None


def _one(gil: bool) -> tuple[float, float]:
    tid = f"quota-bench-{uuid.uuid4().hex[:8]}"
    box = get_sandbox(tid)
    box.limits = SandboxLimits(workspace_bytes=QUOTA, file_bytes=8 * MiB)
    stop = threading.Event()
    hog = threading.Thread(target=_gil_loop, args=(stop,), daemon=True)
    if gil:
        hog.start()
    try:
        started = time.monotonic()
        result = box.run(LOOP, timeout=30)
        took = time.monotonic() - started
    finally:
        stop.set()
        if gil:
            hog.join()
    used = _bwrap.tree_bytes(box.work_dir, 10**12)
    cleanup_sandbox(tid)
    if result.exit_code != 137:
        raise SystemExit(f"the loop was not stopped by the quota: {result}")
    return used / MiB, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    parser.add_argument("--gil", action="store_true", help="a thread of this process keeps "
                        "taking the GIL while each command runs")
    args = parser.parse_args()
    problem = _bwrap.bwrap_problem()
    if problem:
        print(f"bubblewrap does not work here: {problem}", file=sys.stderr)
        return 1
    os.environ["HERMES_SANDBOX"] = "bwrap"
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.load)]
    for proc in burners:
        proc.start()
    print(f"load: {args.load} busy process(es); GIL taken by a thread: {args.gil}; "
          f"cores: {os.cpu_count()}; {args.runs} runs per mode, alternating")
    sizes: dict[str, list[float]] = {"warden": [], "harness thread": []}
    try:
        for _ in range(args.runs):
            for mode in sizes:
                _warden._warden = _warden.Warden() if mode == "warden" else _NoWarden()
                used, _took = _one(args.gil)
                sizes[mode].append(used)
    finally:
        for proc in burners:
            proc.terminate()
    for mode, values in sizes.items():
        print(f"{mode:>15}: median {statistics.median(values):6.1f} MiB, max "
              f"{max(values):6.1f} MiB on disk against a 24 MiB quota   "
              f"({', '.join(f'{v:.0f}' for v in values)})")
    over = {mode: statistics.median(v) - QUOTA / MiB for mode, v in sizes.items()}
    print(f"overshoot, harness thread / warden (medians): "
          f"{over['harness thread']:.1f} / {over['warden']:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
