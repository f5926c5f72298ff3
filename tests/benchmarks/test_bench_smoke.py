"""Smoke test of benchmarks/replay_bench.py: tiny sizes, proves the script runs end to end.

Nothing here is timed: the machine is shared and noisy, so the performance targets are checked
by the script itself (it prints PASS/FAIL per target), never by a timed assertion.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# one worker runs the module: its fixture (the script's quick run) is made once, not per worker
pytestmark = pytest.mark.xdist_group("test_bench_smoke")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "replay_bench.py"
TARGET_NAMES = ("replay <=", "replay per request flat", "our overhead per request",
                "cassette bytes <=", "starts in <=", "recording costs the client <=",
                "recording <=")


@pytest.fixture(scope="module")
def quick_output() -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--sizes", "20,40", "--vcr-sizes", "10,20"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_every_section_reports(quick_output: str) -> None:
    for heading in ("== replay:", "== vcrpy 9 replay", "== load:", "== recording:",
                    "== targets", "machine: nproc="):
        assert heading in quick_output, f"missing section {heading!r}:\n{quick_output}"


def test_one_verdict_per_target(quick_output: str) -> None:
    verdicts = [line for line in quick_output.splitlines() if re.match(r"(PASS|FAIL)  ", line)]
    assert len(verdicts) == len(TARGET_NAMES), verdicts
    for name in TARGET_NAMES:
        assert any(name in line for line in verdicts), (name, verdicts)


def test_replay_rows_are_measured(quick_output: str) -> None:
    rows = re.findall(r"^\s+(20|40)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+-[\d.]+ \|",
                      quick_output, re.M)
    assert [r[0] for r in rows] == ["20", "40"], quick_output
    for _, floor, replay, ratio in rows:
        assert float(floor) > 0 and float(replay) > 0
        assert float(ratio) == pytest.approx(float(replay) / float(floor), rel=0.02)


def test_vcrpy_fit_and_sizes_on_disk(quick_output: str) -> None:
    assert re.search(r"grows as n\^\d+\.\d\d", quick_output), quick_output
    match = re.search(r"cassette bytes <= 40% of vcrpy YAML.*?: ([\d.]+)%", quick_output)
    assert match and 0 < float(match.group(1)) < 100, quick_output


def test_fit_exponent_recovers_a_power_law() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.replay_bench import fit_exponent
    finally:
        sys.path.remove(str(ROOT))
    points = [(n, 3e-4 * n**2.0) for n in (20, 40, 80, 160)]
    assert fit_exponent(points) == pytest.approx(2.0, abs=1e-9)
    assert fit_exponent([(10, 1.0), (100, 10.0)]) == pytest.approx(1.0)
