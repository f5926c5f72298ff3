"""Smoke test of benchmarks/scale_bench.py: 4 cassettes (the fewest that still give each of
the 2 workers on each side more than one), one run of ``-j 2`` and one of
``--executor ray``. Proves the script records, replays through the real CLI in fresh processes
(in a loopback-only network namespace), checks every cassette is ``ok`` on both sides, measures
Ray's task overhead and prints the projection. With ``--ray-address auto`` and no cluster in
that namespace, the Ray side is also the test of ``auto`` falling back to a local cluster.
Nothing is timed here; the ≤1.25× target is the script's own verdict on a full run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "scale_bench.py"

# on the same xdist worker as the Ray cluster tests (tests/hermes_replay/test_replay_on_ray.py),
# so two Ray clusters never share the machine's two cores at once
pytestmark = pytest.mark.xdist_group("ray")


def test_quick_run_replays_every_cassette_on_both_sides_and_projects() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--cassettes", "4",
                           "--ray-address", "auto"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{proc.stderr[-3000:]}"
    walls = dict(re.findall(r"rep 0: (-j 2|ray) *:\s+([\d.]+) s wall,\s+[\d.]+ cassettes/s "
                            r"\(4 ok", out))
    assert set(walls) == {"-j 2", "ray"}, out
    assert "started a local Ray cluster (2 CPUs); no cluster found to join" in out
    assert "4 cassettes on 2 Ray actors (shared filesystem)" in out
    ratio = re.search(r"ray/-j 2 wall ([\d.]+)", out)
    assert ratio and abs(float(ratio.group(1)) - float(walls["ray"]) / float(walls["-j 2"])) \
        < 0.05 + 0.05 * float(ratio.group(1)), out
    assert re.search(r"Ray task round trip \(no-op, one driver, 2 actors\): [\d.]+ ms", out)
    assert len(re.findall(r"cores/node \([\d,]+ actors\): work +\d+ s", out)) == 2, out
    assert re.search(r"^(PASS|FAIL)  ray wall <= 1.25x the wall of -j 2", out, re.M), out
