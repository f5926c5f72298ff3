"""Smoke test of benchmarks/workspace_bench.py: tiny sizes prove the script runs end to end and
prints its three measurements. Nothing is timed here (the script measures, side by side)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_workspace_bench_prints_each_measurement(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "workspace_bench.py"),
                           "--quick"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"^   capture, files stored +[\d.]+ ms", out, re.M), out
    one = int(re.search(r"^   1 rollout +([\d,]+)", out, re.M)[1].replace(",", ""))
    many = int(re.search(r"^   5 rollouts +([\d,]+)", out, re.M)[1].replace(",", ""))
    assert one < many < 2 * one  # five rollouts over one checkout: well under two copies
    assert re.search(r"^   ratio +[\d.]+ +[\d.]+ +\(target: within noise\)", out, re.M), out
