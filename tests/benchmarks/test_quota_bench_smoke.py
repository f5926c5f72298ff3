"""Smoke test of benchmarks/quota_bench.py: one run of each mode proves the script drives both
ways of counting a workspace (the warden, and the harness thread it falls back to) through real
bubblewrap and prints their sizes side by side. Nothing is judged on the numbers here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quota_bench_prints_both_modes_side_by_side(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quota_bench.py"),
                           "--runs", "1"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for mode in ("warden", "harness thread"):
        size = re.search(rf"^ *{mode}: median +([\d.]+) MiB, max +[\d.]+ MiB on disk", out, re.M)
        assert size and float(size[1]) >= 24, out  # stopped by the quota, so past it
    assert re.search(r"^overshoot, harness thread / warden \(medians\): [\d.]+ / [\d.]+ MiB",
                     out, re.M), out
