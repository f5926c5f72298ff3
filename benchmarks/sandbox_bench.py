"""What bubblewrap isolation costs per tool command, side by side with the plain sandbox.

    .venv/bin/python benchmarks/sandbox_bench.py [--commands 40]

Runs the same commands through two ``LocalSandbox``es — one inside bubblewrap, one with
``HERMES_SANDBOX=none`` — alternating A/B/B/A so load from other processes hits both alike,
and prints the median wall time per command of each and their ratio. Two commands: ``true``
(the fixed cost of starting a sandbox) and ``python -c pass`` (an interpreter start, what a
reward's ``pytest`` pays too).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

from environments.tools.sandbox import cleanup_sandbox, get_sandbox


def _time(box, command: str) -> float:
    start = time.perf_counter()
    result = box.run(command, timeout=60)
    elapsed = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=40, help="commands per mode and kind")
    args = parser.parse_args()
    ids = {"bwrap": f"bench-{uuid.uuid4().hex[:6]}-b", "none": f"bench-{uuid.uuid4().hex[:6]}-n"}
    boxes = {"bwrap": get_sandbox(ids["bwrap"], "bwrap")}
    os.environ["HERMES_SANDBOX"] = "none"
    boxes["none"] = get_sandbox(ids["none"])
    assert boxes["bwrap"].isolated and not boxes["none"].isolated
    try:
        print(f"{'command':<16} {'plain ms':>9} {'bwrap ms':>9} {'ratio':>6}")
        for command in ("true", "python -c pass"):
            times: dict[str, list[float]] = {"bwrap": [], "none": []}
            for i in range(args.commands):
                order = ("bwrap", "none") if i % 2 == 0 else ("none", "bwrap")
                for mode in order:
                    times[mode].append(_time(boxes[mode], command))
            plain = statistics.median(times["none"]) * 1000
            isolated = statistics.median(times["bwrap"]) * 1000
            print(f"{command:<16} {plain:9.1f} {isolated:9.1f} {isolated / plain:5.2f}x")
    finally:
        for task_id in ids.values():
            cleanup_sandbox(task_id)


if __name__ == "__main__":
    main()
