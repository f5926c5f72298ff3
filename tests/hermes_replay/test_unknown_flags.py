"""A misspelt environment flag fails before anything runs, with a "did you mean" (issue 25,
item 13): atroposlib takes ``--env.total_step`` for ``--env.total_steps`` and then ignores it,
so without the check a recording runs with the default number of steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _tiny_env import tiny_env_source

from hermes_replay._runner.flags import unknown_flags
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

# one item, one rollout by default: a run that ignores the flag ends fast (and records)
ENV = tiny_env_source()
CASSETTE = Path("cassettes/tiny_env/process.jsonl")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "tiny_env.py").write_text(ENV)
    return tmp_path


def _live(command: str, endpoint: ScriptedEndpoint, *flags: str) -> int:
    return main([command, "envs/tiny_env.py", "--endpoint", endpoint.base_url, "--model", "m",
                 "--", "process", *flags])


@pytest.mark.parametrize("command", ["record", "passthrough"])
def test_an_abbreviated_env_flag_fails_before_anything_runs(
        project: Path, command: str, capsys: pytest.CaptureFixture) -> None:
    with ScriptedEndpoint(script="generic") as ep:
        code = _live(command, ep, "--env.total_step", "3")
        served = len(ep.requests)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--env.total_step; did you mean --env.total_steps?" in err
    assert served == 0  # the endpoint saw nothing
    assert not CASSETTE.exists() and not Path(f"{CASSETTE}.partial").exists()


def test_an_openai_flag_typo_gets_its_suggestion(project: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    with ScriptedEndpoint(script="generic") as ep:
        assert _live("record", ep, "--openai.modle", "m") == 2
    assert "--openai.modle; did you mean --openai.model_name" in capsys.readouterr().err


def test_replay_of_a_command_with_a_typo_fails_the_same(
        project: Path, capsys: pytest.CaptureFixture) -> None:
    with ScriptedEndpoint(script="generic") as ep:
        assert _live("record", ep) == 0
    capsys.readouterr()
    code = main(["replay", "envs/tiny_env.py", "--cassette", str(CASSETTE), "--", "process",
                 "--env.group_siz", "1"])
    out = "".join(capsys.readouterr())
    assert code != 0 and "--env.group_siz; did you mean --env.group_size?" in out, out
    # the main job replays the recorded command: a typo recorded there is refused too
    header = json.loads(CASSETTE.read_text().splitlines()[0])
    lines = CASSETTE.read_text().splitlines()
    header["command"] = [*header["command"], "--env.max_agent_turn", "1"]
    CASSETTE.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert main(["replay", str(CASSETTE), "--out", "out", "--no-report"]) == 1
    out = "".join(capsys.readouterr())
    assert "did you mean --env.max_agent_turns?" in out, out


def test_spelt_in_full_every_flag_passes() -> None:
    options = {"--env.total_steps", "--env.group_size", "--openai.model", "--help", "-h"}
    argv = ["--env.total_steps", "2", "--env.group_size=4", "--openai.model", "m", "--help"]
    assert unknown_flags(argv, options) == []
    assert unknown_flags(["--env.total", "2"], options) == [
        ("--env.total", ["--env.total_steps"])]
