"""The tool policy from the command line (``--tools``, ``--tool NAME=…``) and from pytest
(``--replay-tools``, ``--replay-tool``, the marker): replay runs nothing, execute runs and
reports drift, ``--strict`` makes drift fatal, the command line wins."""

from __future__ import annotations

from pathlib import Path

import pytest

import hermes_replay
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

# An env with the env CLI's shape whose "tools" leave a trace on disk when they really run:
# a clock (a result that differs every run) and an echo (always the same).
CLOCK_ENV = '''
import sys, time
import openai
import hermes_replay
from atroposlib.envs.base import BaseEnv


class ClockEnv(BaseEnv):
    """Never instantiated: replay runs only files that define an environment class."""


def flag(name):
    return sys.argv[sys.argv.index(name) + 1]

def tool(name, value):
    def run():
        with open("ran.txt", "a") as fh:
            fh.write(name + "\\n")
        return {"output": value, "exit_code": 0}
    return hermes_replay.tool_call(name, {"arg": 1}, run)

assert sys.argv[1] == "process", sys.argv
with hermes_replay.rollout("train-clock-0-0") as scope:
    client = openai.OpenAI(base_url=flag("--openai.base_url"), api_key="x", max_retries=0)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "time?"}])
    tool("clock", f"{time.time_ns()}")
    tool("echo", "same")
    scope.report(reward=1.0, turns_used=0, finished_naturally=True, phase="train")
'''


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "clock_env.py").write_text(CLOCK_ENV)
    with ScriptedEndpoint(script="generic") as ep:
        assert main(["record", "envs/clock_env.py", "--cassette", "c.jsonl", "--endpoint",
                     ep.base_url, "--model", "m", "--", "process"]) == 0
    assert Path("ran.txt").read_text().split() == ["clock", "echo"]
    Path("ran.txt").unlink()
    return tmp_path / "c.jsonl"


def _ran() -> list[str]:
    return Path("ran.txt").read_text().split() if Path("ran.txt").exists() else []


def test_cli_replay_runs_no_tool_by_default(recorded: Path, capsys) -> None:
    assert main(["replay", str(recorded), "--out", "out", "--strict"]) == 0
    assert _ran() == []
    assert "tool calls: 2 answered from the cassette, 0 executed" in capsys.readouterr().out


def test_cli_execute_reports_drift_and_strict_makes_it_fatal(recorded: Path, capsys) -> None:
    assert main(["replay", str(recorded), "--out", "out1", "--tools", "execute"]) == 0
    assert _ran() == ["clock", "echo"]
    out = capsys.readouterr().out
    assert "1 tool result(s) drifted from the recording" in out
    assert "tool call 0 (clock): result differs from the recording" in out
    assert "-tool.result.output:" in out and "+tool.result.output:" in out

    assert main(["replay", str(recorded), "--out", "out2", "--tools", "execute",
                 "--strict"]) == 1
    assert "tool calls do not reproduce the recording" in capsys.readouterr().err


def test_cli_one_tool_executed(recorded: Path, capsys) -> None:
    assert main(["replay", str(recorded), "--out", "out", "--tool", "echo=execute",
                 "--strict"]) == 0
    assert _ran() == ["echo"]
    assert main(["replay", str(recorded), "--tool", "echo"]) == 2
    assert "NAME=replay or NAME=execute" in capsys.readouterr().err


PYTEST_FILE = '''
import pytest
from pathlib import Path
import hermes_replay

@pytest.mark.cassette({path!r}{marker})
def test_tools(hermes_cassette):
    ran = []
    with hermes_replay.rollout("train-clock-0-0"):
        for name in ("clock", "echo"):
            hermes_replay.tool_call(name, {{"arg": 1}},
                                    lambda: ran.append(name) or {{"output": "x", "exit_code": 0}})
    Path("ran-in-test.txt").write_text(" ".join(ran))
'''


@pytest.mark.parametrize(("marker", "args", "expected"), [
    ("", [], ""),
    ("", ["--replay-tools", "execute"], "clock echo"),
    ("", ["--replay-tool", "clock=execute"], "clock"),
    (", tools='execute'", [], "clock echo"),
    (", tools='execute'", ["--replay-tools", "replay"], ""),  # the command line wins
])
def test_pytest_options_and_marker_set_the_tool_policy(
        recorded: Path, pytester: pytest.Pytester, marker: str, args: list[str],
        expected: str) -> None:
    pytester.makepyfile(PYTEST_FILE.format(path=str(recorded), marker=marker))
    pytester.runpytest("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)
    assert (pytester.path / "ran-in-test.txt").read_text() == expected


def test_pytest_rejects_a_bad_tool_policy(recorded: Path, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PYTEST_FILE.format(path=str(recorded), marker=""))
    result = pytester.runpytest("-p", "no:cacheprovider", "--replay-tool", "clock")
    assert result.ret != 0


def test_run_cassette_takes_the_policy(recorded: Path, tmp_path: Path) -> None:
    result = hermes_replay.run_cassette(recorded, out_dir=tmp_path / "o", tools="execute")
    assert _ran() == ["clock", "echo"]
    assert result.summary is not None and result.summary.tools_executed == 2
    assert len(result.summary.tool_drift) == 1
