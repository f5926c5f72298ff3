"""``pytest -n N`` (the README's test command) keeps each ``xdist_group`` on one worker: the
plugin ``_xdist_groups`` is loaded into a real sub-session with two workers, and the tests of
one group must all report the same worker while the ungrouped ones still spread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TESTS = '''
import json, os
import pytest

def _note(name):
    with open(os.environ["WHERE_LOG"], "a") as f:
        f.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")

@pytest.mark.xdist_group("cluster")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    _note(f"grouped-{i}")

@pytest.mark.parametrize("i", range(12))
def test_free(i):
    import time
    time.sleep(0.05)  # long enough that one worker cannot take them all
    _note(f"free-{i}")
'''


def test_a_group_runs_on_one_worker_under_plain_dash_n(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    log = pytester.path / "where.jsonl"
    monkeypatch.setenv("WHERE_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # where _xdist_groups is
    pytester.makepyfile(test_where=TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "_xdist_groups", "-p",
                                           "no:cacheprovider", "-q")
    result.assert_outcomes(passed=18)
    where = dict(json.loads(line) for line in log.read_text().splitlines())
    grouped = {where[f"grouped-{i}"] for i in range(6)}
    assert len(grouped) == 1, where  # one worker ran the whole group
    assert {where[f"free-{i}"] for i in range(12)} == {"gw0", "gw1"}, where
