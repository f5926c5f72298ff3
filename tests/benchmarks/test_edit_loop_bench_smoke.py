"""Smoke tests of benchmarks/watch_bench.py and benchmarks/pytest_bench.py: one rep each, so
they prove the scripts run end to end and print their figures beside the targets.

Nothing here is timed: the machine is shared and noisy, so whether a target passes is the
script's verdict (PASS or FAIL, both accepted here), never a timed assertion. What must hold
is that each verdict line is there, with figures that are numbers and ratios that agree with
them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    # exit 1 is a FAIL verdict on a loaded machine: the lines below say which
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def test_watch_bench_prints_save_to_verdict_beside_its_target() -> None:
    out = _run("watch_bench.py", "--reps", "1", "--only", "one")
    assert re.search(r"load average [\d.]+ [\d.]+ [\d.]+", out), out
    rep = re.search(r"rep 0: watch +([\d.]+) s \(([\d.]+) s CPU\) · cold replay +([\d.]+) s "
                    r"\(([\d.]+) s CPU\)", out)
    assert rep, out
    watch, watch_cpu, cold, cold_cpu = map(float, rep.groups())
    assert watch > 0 and watch_cpu > 0 and cold > 0 and cold_cpu > 0
    summary = re.search(r"one cassette: save -> verdict median ([\d.]+) s wall, .* · "
                        r"([\d.]+)x faster \(CPU ([\d.]+)x\)", out)
    assert summary, out
    assert float(summary[1]) == pytest.approx(watch, abs=0.006)
    assert float(summary[2]) == pytest.approx(cold / watch, rel=0.05, abs=0.06)
    assert float(summary[3]) == pytest.approx(cold_cpu / watch_cpu, rel=0.05, abs=0.06)
    verdict = re.search(r"^(PASS|FAIL)  one cassette: save -> verdict <= 0\.5 s: ([\d.]+) s",
                        out, re.M)
    assert verdict, out
    assert (verdict[1] == "PASS") == (float(verdict[2]) <= 0.5)
    assert " cassettes: save" not in out  # --only one


def test_pytest_bench_prints_three_versus_one_beside_its_target() -> None:
    out = _run("pytest_bench.py", "--reps", "1")
    runs = dict(re.findall(r"rep 0: +(one|three) test\(s\): +([\d.]+) s wall", out))
    assert set(runs) == {"one", "three"}, out
    ratio = re.search(r"ratio ([\d.]+)x wall, ([\d.]+)x CPU", out)
    assert ratio, out
    assert float(ratio[1]) == pytest.approx(float(runs["three"]) / float(runs["one"]),
                                            rel=0.05, abs=0.02)
    verdict = re.search(r"^(PASS|FAIL)  3 cassette tests <= 1\.5x the time of 1: ([\d.]+)x",
                        out, re.M)
    assert verdict, out
    assert (verdict[1] == "PASS") == (float(verdict[2]) <= 1.5)
