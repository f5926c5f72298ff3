"""The CLI and the library run a cassette through one runner (``hermes_replay._runner.run``): the
same cassette replayed by ``hermes-replay replay`` and by ``run_cassette`` gives the same
result, and both refuse a cassette whose env file cannot be found with the same message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
CASSETTE = ROOT / "cassettes" / "multi_signal_env" / "evaluate.jsonl"


def _comparable(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in ("cassette", "command"):  # where it ran differs; what it ran must not
        data.pop(key)
    return data


def test_cli_and_run_cassette_give_the_same_result(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["replay", str(CASSETTE), "--out", str(tmp_path / "cli")]) == 0
    cli = _comparable(tmp_path / "cli" / "evaluate" / "result.json")
    result = hermes_replay.run_cassette(CASSETTE, out_dir=tmp_path / "lib")
    lib = _comparable(tmp_path / "lib" / "result.json")
    assert cli == lib
    assert len(result.rollouts) == len(cli["rollouts"]) > 0
    assert cli["eval_metrics"], "an evaluate replay writes metrics"


def test_a_missing_env_file_is_one_message_everywhere(tmp_path: Path, capsys,
                                                       monkeypatch) -> None:
    project = tmp_path / "project"
    (project / "cassettes").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname='x'\n", encoding="utf-8")
    cassette = project / "cassettes" / "evaluate.jsonl"
    shutil.copy(CASSETTE, cassette)  # names environments/multi_signal_env.py, absent here
    monkeypatch.chdir(project)
    with pytest.raises(hermes_replay.CassetteError) as raised:
        hermes_replay.run_cassette(cassette, out_dir=tmp_path / "out")
    library = str(raised.value).splitlines()[0]
    assert "environments/multi_signal_env.py was not found" in library
    assert main(["replay", str(cassette), "--out", str(tmp_path / "o")]) == 1
    captured = capsys.readouterr()
    assert library in captured.out + captured.err
