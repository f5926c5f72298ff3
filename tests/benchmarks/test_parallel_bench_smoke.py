"""Smoke test of benchmarks/parallel_bench.py: two small generated cassettes, one rep each of
``-j 1`` and ``-j 2``. Proves the script records, replays through the real CLI in fresh
processes, checks every cassette is ``ok`` and reports a ratio of the medians it printed.
Nothing is timed here; the ≥1.6× target is the script's own verdict on a full run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "parallel_bench.py"


def test_quick_run_replays_every_cassette_at_both_job_counts() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--shipped", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=420)
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr[-3000:]}"
    assert "0 shipped + 2 generated cassettes" in out, out
    walls = {int(j): float(w) for j, w in
             re.findall(r"rep 0: -j (\d):\s+([\d.]+) s wall \(2 cassettes ok\)", out)}
    assert set(walls) == {1, 2} and all(w > 0 for w in walls.values()), out
    median = re.search(r"-j 1 median ([\d.]+) s · -j 2 median ([\d.]+) s · ([\d.]+)x faster", out)
    assert median, out
    one, two, ratio = map(float, median.groups())
    assert (one, two) == (round(walls[1], 1), round(walls[2], 1))
    assert abs(ratio - walls[1] / walls[2]) < 0.02 + 0.1 * ratio  # rounded to 0.1 s above
    assert re.search(r"^(PASS|FAIL)  -j 2 >= 1.6x faster", out, re.M), out
