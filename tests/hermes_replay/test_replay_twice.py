"""``replay --twice`` finds nondeterminism: two replays in fresh interpreters, the first request
field, tool result or reward that differs, and what fixes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hermes_replay._runner.twice import VOLATILE, compare_traces, replay_twice
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

# An env with the env CLI's shape. TWICE_KIND picks its nondeterminism: "time" puts the time
# in its prompt, "reward" scores with unseeded randomness, "tool" runs a clock tool,
# anything else is deterministic.
ENV = '''
import datetime, os, random, sys, time
import openai
import hermes_replay
from atroposlib.envs.base import BaseEnv


class TwiceEnv(BaseEnv):
    """Never instantiated: replay runs only files that define an environment class."""


def flag(name):
    return sys.argv[sys.argv.index(name) + 1]

kind = os.environ.get("TWICE_KIND", "")
client = openai.OpenAI(base_url=flag("--openai.base_url"), api_key="x", max_retries=0)
with hermes_replay.rollout("train-twice-0-0") as scope:
    system = "You are terse."
    if kind == "time":
        system += f" The time is {datetime.datetime.now().isoformat()}."
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "2+2?"}]
    client.chat.completions.create(model="m", messages=messages)
    hermes_replay.tool_call("clock", {}, lambda: {"output": str(time.time_ns()), "exit_code": 0})
    # SystemRandom: randomness replay's seeding of `random`/numpy does not fix
    reward = random.SystemRandom().random() if kind == "reward" else 1.0
    scope.report(reward=reward, turns_used=1, finished_naturally=True, phase="train")
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "twice_env.py").write_text(ENV)
    return tmp_path


def _record(kind: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TWICE_KIND", kind)
    with ScriptedEndpoint(script="generic") as ep:
        assert main(["record", "envs/twice_env.py", "--cassette", f"{kind or 'same'}.jsonl",
                     "--endpoint", ep.base_url, "--model", "m", "--", "process"]) == 0
    return Path(f"{kind or 'same'}.jsonl").resolve()


def test_time_in_the_prompt_is_found_with_the_normalizer_that_fixes_it(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    cassette = _record("time", monkeypatch)
    assert main(["replay", str(cassette), "--twice", "--out", "twice"]) == 1
    out = capsys.readouterr().out
    assert "the two replays differ first at request · rollout train-twice-0-0 · turn 1" in out
    assert "field  body.messages[0].content" in out
    assert "the values differ by a timestamp" in out
    assert "normalizers=[(r'\\d{4}-\\d\\d-\\d\\d[T ]" in out  # a raw string, pasteable

    # the suggested normalizer, applied, makes the two replays agree (and match the recording)
    pattern = next(p for name, p, _ in VOLATILE if name == "a timestamp")
    report = replay_twice(cassette, project / "twice2", normalizers=[(pattern, "<time>")])
    assert report.deterministic, report.lines()
    assert report.compared["requests"] == 1 and report.compared["rewards"] == 1


def test_a_deterministic_cassette_replays_the_same_twice(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    cassette = _record("", monkeypatch)
    monkeypatch.setenv("TWICE_KIND", "")
    assert main(["replay", str(cassette), "--twice", "--out", "twice"]) == 0
    out = capsys.readouterr().out
    assert "the two replays agree (1 requests, 1 tool calls, 1 rewards compared)" in out


def test_an_unseeded_reward_gets_a_note_to_seed(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = _record("reward", monkeypatch)
    report = replay_twice(cassette, project / "twice")
    assert report.difference is not None
    assert report.difference.what == "reward"
    assert "seeds Python's `random`" in report.difference.suggestion


def test_an_executed_tool_whose_output_varies_is_found(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = _record("", monkeypatch)
    # replayed with tools from the cassette, the same cassette agrees with itself: proved by
    # test_a_deterministic_cassette_replays_the_same_twice (not run twice more here: 4 fresh
    # interpreters); executed, the clock tool's output differs between the two runs
    report = replay_twice(cassette, project / "executed", tools="execute")
    diff = report.difference
    assert diff is not None and diff.what == "tool result"
    assert diff.position == "tool call 0 (clock)" and diff.field == "result.output"
    assert "a long number" in diff.suggestion


def test_a_run_that_leaves_no_trace_is_an_error_not_agreement(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a cassette\n")
    report = replay_twice(bad, tmp_path / "out")
    assert not report.deterministic and len(report.errors) == 2


def test_compare_traces_reports_the_earliest_turn_first() -> None:
    def req(rollout: str, seq: int, content: str) -> dict:
        return {"kind": "request", "rollout": rollout, "seq": seq, "turn": seq,
                "request": {"body": {"messages": [{"content": content}]}}}

    a = [req("r2", 0, "same"), req("r1", 0, "same"), req("r1", 1, "x"), req("r2", 1, "late")]
    b = [req("r2", 0, "same"), req("r1", 0, "same"), req("r1", 1, "y"), req("r2", 1, "LATE")]
    diff, _ = compare_traces(a, b)
    assert diff is not None and (diff.rollout, diff.position) == ("r1", "turn 2")
    assert re.search(r"ignore_paths=\['body.messages\[\*\].content'\]", diff.suggestion)


def _traced_runs(tmp_path: Path, first: list[dict], second: list[dict],
                 rerun_error: str | None = None) -> tuple[object, Path, list[dict]]:
    """A check's process run and rerun folder, with these two traces (the check's own two
    fresh-interpreter replays of the process cassette), as ``check_dynamic`` leaves them."""
    from hermes_replay._check._runs import TRACE_FILE, ModeRun

    (tmp_path / "process").mkdir(parents=True)
    (tmp_path / "rerun").mkdir()
    for path, trace in ((tmp_path / "process" / TRACE_FILE, first),
                        (tmp_path / "rerun" / "trace-1.jsonl", second)):
        path.write_text("".join(json.dumps(e) + "\n" for e in trace))
    process = ModeRun("process", output=tmp_path / "process" / "groups.jsonl",
                      cassette=tmp_path / "process.jsonl",
                      trace=tmp_path / "process" / TRACE_FILE)
    runs = [{"rewards": {}, "error": rerun_error}, {"rewards": {}, "error": None}]
    return process, tmp_path / "rerun", runs


def _trace(reward: float, content: str = "2+2?") -> list[dict]:
    return [{"kind": "request", "rollout": "r1", "seq": 0, "turn": 0,
             "request": {"body": {"messages": [{"content": content}]}}},
            {"kind": "outcome", "rollout": "r1", "reward": reward}]


def test_check_twice_row_compares_the_traces_of_its_own_two_fresh_runs(tmp_path: Path) -> None:
    """No run of its own: the process run and the rerun's first run are two fresh
    interpreters replaying the process cassette with the checked env file."""
    from hermes_replay._check._runs import traced_twice_row

    row = traced_twice_row("env.py", *_traced_runs(tmp_path / "same", _trace(1.0), _trace(1.0)))
    assert row is not None and row.status == "pass" and row.findings == []

    row = traced_twice_row("env.py", *_traced_runs(tmp_path / "reward", _trace(1.0),
                                                   _trace(0.25)))
    assert row is not None and row.status == "fail"
    assert "differ first at reward · rollout r1" in row.findings[0].message
    assert "run 1  1.0" in row.findings[0].message and "run 2  0.25" in row.findings[0].message
    assert "seeds Python's `random`" in row.findings[0].message

    row = traced_twice_row("env.py", *_traced_runs(tmp_path / "time", _trace(1.0, "at 12:00:01"),
                                                   _trace(1.0, "at 12:00:02")))
    assert row is not None and "a time of day" in row.findings[0].message

    # two runs that did nothing agree, and prove nothing
    row = traced_twice_row("env.py", *_traced_runs(tmp_path / "empty", [], []))
    assert row is not None and row.status == "fail"
    assert "made no request, tool call or reward to compare" in row.findings[0].message


def test_check_twice_row_replays_itself_when_a_traced_run_failed(tmp_path: Path) -> None:
    """A failed or missing run is not compared: ``check_dynamic`` then falls back to
    ``twice_row`` (two replays of its own, whose failures it reports)."""
    from hermes_replay._check._runs import traced_twice_row

    process, rerun, runs = _traced_runs(tmp_path / "a", _trace(1.0), _trace(1.0),
                                        rerun_error="CassetteMiss: no recording")
    assert traced_twice_row("env.py", process, rerun, runs) is None
    process, rerun, runs = _traced_runs(tmp_path / "b", _trace(1.0), _trace(1.0))
    assert traced_twice_row("env.py", process, rerun, "the two runs did not finish") is None
    (rerun / "trace-1.jsonl").unlink()
    assert traced_twice_row("env.py", process, rerun, runs) is None
    process.exit_code = 1
    assert traced_twice_row("env.py", process, rerun, runs) is None


def _make_both_runs_miss(cassette: Path) -> None:
    """Change the recorded user message (and drop its fingerprint, so the body is matched as
    it reads): every replay of the unchanged env then misses the same way."""
    lines = cassette.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "interaction":
            record["request"]["body"]["messages"][1]["content"] = "3+3?"
            record["fingerprint"] = ""
            lines[i] = json.dumps(record)
    cassette.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_two_runs_that_both_miss_are_a_failure_not_agreement(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    cassette = _record("", monkeypatch)
    _make_both_runs_miss(cassette)
    assert main(["replay", str(cassette), "--twice", "--out", "twice"]) == 1
    out = capsys.readouterr().out
    assert "the two replays agree" not in out
    assert "run 1 failed:" in out and "run 2 failed:" in out
    assert "had no matching recording" in out, out
    assert "0 of 1 cassette(s) replay the same twice" in out


def test_check_twice_row_fails_when_both_runs_miss(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hermes_replay._check._runs import twice_row

    cassette = _record("", monkeypatch)
    _make_both_runs_miss(cassette)
    row = twice_row("envs/twice_env.py", cassette, project / "work")
    assert row.status == "fail"
    assert [f for f in row.findings if "run 1 failed:" in str(f)], row.findings
    assert [f for f in row.findings if "run 2 failed:" in str(f)], row.findings


def test_check_twice_row_does_not_fail_again_for_the_process_rows_cause(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette that no longer matches the env fails the process row; both replays of the
    twice row then fail the same way: one cause, said once (a warning pointing at the process
    row), not a third failure repeating both runs' misses."""
    from hermes_replay._check._runs import twice_row

    cassette = _record("", monkeypatch)
    _make_both_runs_miss(cassette)
    row = twice_row("envs/twice_env.py", cassette, project / "work", process_failed=True)
    assert row.status == "warn", row.findings
    [finding] = row.findings
    assert "not judged: both replays failed, as the process run did" in finding.message
    assert "had no matching recording" in finding.message  # the cause, in one line
    assert "run 2 failed" not in finding.message
    assert "fix the process row above" in str(finding)
