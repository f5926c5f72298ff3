"""pytest pays the imports once: a session of three cassette tests beside a session of one.

    .venv/bin/python benchmarks/pytest_bench.py [--reps 4]

A user project in a temporary folder (as ``watch_bench.py`` makes it: the three shipped
``process`` cassettes and their env files) gets two test files: one test replaying
multi_signal_env's cassette through the plugin's ``replay_run``, and three tests replaying one
shipped ``process`` cassette each. Each timed run is a real ``pytest`` session in a fresh
interpreter, the two files in turn (AB, BA, …) so load from other processes hits both alike.
The plugin replays in the test's own process (the env file run as ``__main__``, the stack
imported by the first test and reused by the next), so three tests should cost the imports
once. Printed: the medians (wall and CPU), the ratio, and the target with PASS/FAIL:

- three cassette tests <= 1.5x the time of one (wall; CPU printed beside it)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.watch_bench import ENVS, make_project

TARGET_RATIO = 1.5
PYTEST = Path(sys.executable).with_name("pytest")
_TEST = '''
@pytest.mark.cassette("cassettes/{env}/process.jsonl")
def test_{env}(replay_run):
    result = replay_run()
    assert len(result.rollouts) == len(result.recorded_rewards) > 0
'''


def write_tests(project: Path) -> tuple[Path, Path]:
    # in a folder of their own: pytest puts a test file's folder on sys.path, and the
    # project root's ``environments/`` would shadow the installed package of that name
    tests = project / "tests"
    tests.mkdir()
    one = tests / "test_one.py"
    one.write_text("import pytest\n" + _TEST.format(env=ENVS[0]))
    three = tests / "test_three.py"
    three.write_text("import pytest\n" + "".join(_TEST.format(env=e) for e in ENVS))
    return one, three


def session(project: Path, test_file: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one pytest session of ``test_file``; fails loudly."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(PYTEST), "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(test_file.relative_to(project))], cwd=project,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"pytest {test_file.name} failed ({done.returncode}):\n"
                         f"{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=4, help="sessions of each file (default 4)")
    args = ap.parse_args(argv)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"pytest benchmark: nproc={os.cpu_count()}; load average {load}", flush=True)
    got: dict[str, list[tuple[float, float]]] = {"one": [], "three": []}
    with tempfile.TemporaryDirectory(prefix="pytest-bench-") as tmp:
        project = make_project(Path(tmp) / "project")
        files = dict(zip(("one", "three"), write_tests(project), strict=True))
        for rep in range(args.reps):
            order = ("one", "three") if rep % 2 == 0 else ("three", "one")
            for name in order:
                wall, cpu = session(project, files[name])
                got[name].append((wall, cpu))
                print(f"  rep {rep}: {name:>5} test(s): {wall:5.2f} s wall, {cpu:5.2f} s CPU",
                      flush=True)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in got.items()}
    ratio, cpu_ratio = med["three"][0] / med["one"][0], med["three"][1] / med["one"][1]
    print(f"one test median {med['one'][0]:.2f} s wall ({med['one'][1]:.2f} s CPU) · three "
          f"tests {med['three'][0]:.2f} s wall ({med['three'][1]:.2f} s CPU) · ratio "
          f"{ratio:.2f}x wall, {cpu_ratio:.2f}x CPU")
    # judged as printed (two decimals): an unrounded 1.504x printed as "1.50x" beside a FAIL
    # would contradict itself
    ok = round(ratio, 2) <= TARGET_RATIO
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{'PASS' if ok else 'FAIL'}  3 cassette tests <= {TARGET_RATIO}x the time of 1: "
          f"{ratio:.2f}x wall ({cpu_ratio:.2f}x CPU; load average now {load})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
