"""Smoke test of benchmarks/cli_cost_bench.py: one run per side, so it proves the script runs
end to end and prints figures that agree with each other. Nothing here is timed (the machine
is shared and noisy); the rewards of the two sides must agree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_cli_cost_bench_prints_both_sides_and_their_ratio() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cli_cost_bench.py"),
                           "--reps", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    found = re.search(r"on ([\d.]+) ms · off ([\d.]+) ms · saved (-?[\d.]+) ms · "
                      r"off/on ([\d.]+)x \(load average [\d.]+\)", proc.stdout)
    assert found, proc.stdout
    on, off, saved, ratio = map(float, found.groups())
    assert on > 0 and off > 0
    assert saved == pytest.approx(off - on, abs=0.2)
    assert ratio == pytest.approx(off / on, abs=0.011)
    assert "PASS  rewards equal with and without the patches" in proc.stdout
