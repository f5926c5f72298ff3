"""Recording seeds ``random`` and numpy and keeps the seed; replay seeds the same.

The environment shuffles its questions with unseeded ``random`` and draws a number from numpy's
global generator in ``setup()``. Recorded through the CLI against the scripted endpoint, it must
replay with 0 misses three times in a row — and a replay under another seed must miss (so the
seed, not luck, is what makes it pass).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ENV = Path(__file__).parent / "seed_envs" / "shuffled_env.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    (tmp_path / "envs").mkdir()
    shutil.copy(ENV, tmp_path / "envs" / ENV.name)
    return tmp_path


def _record(capsys, *extra: str) -> Path:
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        code = main(["record", "envs/shuffled_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", *extra, "--", "process", "--env.total_steps", "2",
                     "--env.group_size", "2", "--env.use_wandb", "false"])
    captured = capsys.readouterr()
    assert code == 0, captured.err + captured.out
    return Path("cassettes/shuffled_env/process.jsonl").resolve()


def _header(cassette: Path) -> dict:
    return json.loads(cassette.read_text(encoding="utf-8").splitlines()[0])


def test_unseeded_shuffle_replays_with_no_miss_three_times(project: Path, capsys) -> None:
    cassette = _record(capsys)
    seed = _header(cassette)["seed"]
    assert isinstance(seed, int)
    for run in range(3):
        result = hermes_replay.run_cassette(cassette, out_dir=project / f"out{run}",
                                            raise_errors=False)
        assert result.error is None and result.exit_code == 0, result.error
        assert result.misses == [] and result.unused == []
        assert len(result.rollouts) == 4 and result.changed_rewards() == {}


def test_another_seed_asks_other_questions_and_misses(project: Path, capsys) -> None:
    cassette = _record(capsys)
    other = (_header(cassette)["seed"] + 1) % 2**31
    result = hermes_replay.run_cassette(cassette, out_dir=project / "out", seed=other,
                                        raise_errors=False)
    assert result.misses, "a different seed must change the questions, else this proves nothing"


def test_record_takes_the_seed_it_is_given(project: Path, capsys) -> None:
    cassette = _record(capsys, "--seed", "1234")
    assert _header(cassette)["seed"] == 1234
    again = hermes_replay.run_cassette(cassette, out_dir=project / "out", raise_errors=False)
    assert again.misses == [] and again.exit_code == 0
