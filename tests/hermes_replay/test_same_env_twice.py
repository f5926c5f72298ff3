"""One environment file run twice in one process gives the same results both times.

``calc_tool_env`` registers its own tool at import, the shape that used to fail every second
run (``tool 'calculator' is already registered``): in a folder replay, in two pytest tests of
one env, and in ``check``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

# pytester's in-process runs drop modules first imported inside them, and numpy (under
# atroposlib) cannot be imported twice per process: import the heavy stack out here.
import environments.hermes_base_env  # noqa: F401
from hermes_replay.cli import main


def _results(out: Path) -> dict[str, dict[str, float | None]]:
    found = {}
    for path in sorted(out.rglob("result.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found[path.parent.relative_to(out).as_posix()] = {
            r["id"]: r["reward"] for r in data["rollouts"]}
    return found


def test_folder_replay_runs_the_same_env_twice_with_identical_results(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = calc_project / "cassettes" / "calc_tool_env_again" / "process.jsonl"
    copy.parent.mkdir()
    shutil.copy(calc_project / "cassettes" / "calc_tool_env" / "process.jsonl", copy)
    code = main(["replay", "cassettes", "--out", "out"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ERROR" not in out and "already registered" not in out
    results = _results(calc_project / "out")
    assert sorted(results) == ["calc_tool_env/process", "calc_tool_env_again/process"]
    first, second = results.values()
    assert len(first) == 4 and first == second


TWO_TESTS = """
import pytest

@pytest.mark.cassette("cassettes/calc_tool_env/process.jsonl")
@pytest.mark.parametrize("attempt", [1, 2])
def test_calc_rewards(replay_run, attempt):
    result = replay_run()
    assert result.exit_code == 0 and not result.misses
    assert len(result.rewards) == 4
    with open(f"rewards-{attempt}.txt", "w") as fh:
        fh.write(repr(result.rewards))
"""


def test_two_pytest_tests_of_one_env_both_pass_alike(calc_project: Path,
                                                      pytester: pytest.Pytester) -> None:
    for item in calc_project.iterdir():
        shutil.move(str(item), pytester.path / item.name)
    pytester.makepyfile(test_calc=TWO_TESTS)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
    first = (pytester.path / "rewards-1.txt").read_text()
    assert first == (pytester.path / "rewards-2.txt").read_text()
    assert first.count("train-") == 4


def test_check_runs_the_env_twice_in_one_process_and_flags_leaked_state(
        calc_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(A clean env's ``rerun`` row passing is part of test_check_dynamic's live check.)"""
    from hermes_replay._check import Target, check_env

    # compute_reward keeps a cache in an imported module (tests/calc_state.py)
    monkeypatch.setenv("CALC_ENV_LEAK", "1")
    cassette = calc_project / "cassettes" / "calc_tool_env" / "process.jsonl"
    rows = check_env(calc_project / "environments" / "calc_tool_env.py",
                     target=Target(cassette=cassette))
    dynamic = {r.rule: r for r in rows if r.kind == "dynamic"}
    assert dynamic["process"].status == "pass", dynamic["process"].findings
    rerun = dynamic["rerun"]
    assert rerun.status == "fail"
    message = rerun.findings[0].message
    assert re.match(r"state leaks between runs in one process: [1-4] rollout reward\(s\) "
                    r"changed on the second run \(train-\S+: 0\.9 then 0\.65", message), message
    assert "module-level caches" in rerun.findings[0].fix
    # (no claim on the twice row here: within one run the cache also decides which of an
    # item's two concurrent rollouts scores 0.65, and that order may differ between two fresh
    # interpreters — the twice row then rightly reports it)
