"""Instruction counts of the floor and of replay, under valgrind's callgrind.

CPU time on a shared machine moves by ±20% from run to run, more than the 10% the replay
target allows, so the same comparison is also made in a unit that does not move: the
number of instructions executed. Each mode runs in its own interpreter under
``valgrind --tool=callgrind``; only the driven requests are counted — collection is
switched on inside ``sys.call_tracing`` (a C function nothing else on this path calls),
so imports, traffic generation and the session's start are left out. The count is
deterministic to a fraction of a percent; cache misses and branch mispredictions are not
in it, which is why CPU time is still printed beside it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["available", "count", "count_all"]

_ROOT = Path(__file__).resolve().parent.parent
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def available() -> bool:
    return shutil.which("valgrind") is not None


def count(mode: str, interactions: int, cassette: Path | None, turns: int) -> int:
    """Instructions executed while driving ``interactions`` requests in ``mode``."""
    with tempfile.TemporaryDirectory(prefix="hermes-cg-") as tmp:
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=sys_call_tracing", f"--callgrind-out-file={tmp}/cg.out",
               sys.executable, "-m", "benchmarks._instructions", mode, str(interactions),
               str(turns), str(cassette or "")]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # same dict layouts in every run
        done = subprocess.run(cmd, cwd=_ROOT, capture_output=True, text=True, timeout=3600,
                              env=env)
        found = _COLLECTED.findall(done.stderr)
        if done.returncode != 0 or not found:
            raise RuntimeError(f"callgrind run of {mode} failed ({done.returncode}):\n"
                               + done.stderr[-2000:])
        return int(found[-1])


def count_all(jobs: dict[Any, tuple[str, int, Path | None, int]]) -> dict[Any, int]:
    """``count`` for every job, two at a time (callgrind runs one thread per process)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(count, *job) for key, job in jobs.items()}
        return {key: future.result() for key, future in futures.items()}


def _child(mode: str, interactions: int, turns: int, cassette: str) -> None:
    import hermes_replay
    from benchmarks import _drivers, _synthetic

    rollouts = _synthetic.build_traffic(interactions, turns=turns)[: interactions // turns]
    answers = _drivers.response_bytes(rollouts)
    _drivers.run(rollouts[:1], _drivers.DictTransport(answers))  # warm the SDK up
    if mode == "floor":
        sys.call_tracing(_drivers.run, (rollouts, _drivers.DictTransport(answers)))
        return
    # the cassette holds the larger size's rollouts: the rest are left unused, not an error
    session = hermes_replay.cassette(cassette, mode="replay")
    with session:
        sys.call_tracing(_drivers.run, (rollouts,))
    summary = session.summary()
    assert not summary.misses and summary.interactions == _synthetic.count(rollouts)


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
