"""The pytest plugin under pytest-xdist: ``pytest -n 2`` spreads a project's cassettes over
two worker processes and replays each exactly once, strictly, every one green.

A real pytest session in a subprocess (xdist starts its own worker processes), over a user
project holding the shipped cassettes of the three example environments and their env files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

REPLAY_EACH = """
import os
from pathlib import Path

import pytest

CASSETTES = sorted(Path("cassettes").glob("*/*.jsonl"))


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_cassette_replays(path, replay_run):
    result = replay_run(path, strict=True)
    assert result.exit_code == 0 and not result.misses and not result.unused
    assert result.rewards and result.changed_rewards() == {}
    with open("replayed.log", "a", encoding="utf-8") as fh:
        fh.write(f"{os.environ['PYTEST_XDIST_WORKER']} {path} {len(result.rewards)}\\n")
"""


@pytest.mark.slow
def test_each_cassette_is_replayed_once_across_xdist_workers(pytester: pytest.Pytester) -> None:
    shipped = sorted((ROOT / "cassettes").glob("*/evaluate.jsonl"))  # the three smallest
    (pytester.path / "environments").mkdir()
    for cassette in shipped:
        env = cassette.parent.name
        (pytester.path / "cassettes" / env).mkdir(parents=True, exist_ok=True)
        shutil.copy(cassette, pytester.path / "cassettes" / env / cassette.name)
        shutil.copy(ROOT / "environments" / f"{env}.py",
                    pytester.path / "environments" / f"{env}.py")
    pytester.makepyfile(test_replay_each=REPLAY_EACH)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(shipped))
    lines = (pytester.path / "replayed.log").read_text(encoding="utf-8").splitlines()
    replayed = [line.split()[1] for line in lines]
    expected = sorted(str(c.relative_to(ROOT)) for c in shipped)
    assert sorted(replayed) == expected  # every cassette, each exactly once
    assert {line.split()[0] for line in lines} == {"gw0", "gw1"}  # both workers replayed
    assert all(int(line.split()[2]) > 0 for line in lines)
