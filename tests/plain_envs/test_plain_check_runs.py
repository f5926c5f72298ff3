"""``check`` runs what ``replay`` runs (issue 45, item 3).

- ``record`` always writes the folder it ran in (``extra.env_cwd``, ``"."`` at the root), and
  ``check`` replays each mode there: an env that reads a relative config file recorded from its
  own folder passes ``check`` started from the project root.
- A plain env recorded over an OpenAI-type server through ``managed_server`` carries
  atroposlib's placeholder tokens and masks (its DummyManagedServer, turned on by the harness):
  ``check`` names them and does not fail them.
- Live ``check --endpoint`` takes the env's flags after ``--`` as ``record`` does (here the
  local tokenizer: no hub), and adds no flag a plain env refuses (``--env.eval_size``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / "envs").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    for name in ("relative_config_env.py", "managed_regex_env.py"):
        shutil.copy(HERE / name, root / "envs" / name)
    yield root
    import wandb

    if wandb.run is not None:
        wandb.finish()


def _failed(records: list[dict]) -> list[tuple[str, str]]:
    return [(r["rule"], r["message"][-800:]) for r in records if r["status"] == "fail"]


def test_check_replays_in_the_folder_record_ran_in(project, monkeypatch, capsys):
    """Recorded at the project root (``env_cwd`` "."), with another config file beside the
    env: ``check`` must load the root's, as ``replay`` does, wherever it starts from."""
    (project / "sums_config.json").write_text(json.dumps({"pairs": [[3, 4], [10, 20]]}))
    (project / "envs" / "sums_config.json").write_text(json.dumps({"pairs": [[50, 60]]}))
    monkeypatch.chdir(project)
    cassette = project / "cassettes" / "relative_config_env" / "process.jsonl"
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        assert main(["record", "envs/relative_config_env.py", "--cassette", str(cassette),
                     "--endpoint", endpoint.base_url, "--model", "scripted", "--", "process",
                     "--env.tokenizer_name", str(bundled_tokenizer_path())]) == 0
    assert load_cassette(cassette).header.extra["env_cwd"] == "."
    for start in (project, project / "envs"):
        monkeypatch.chdir(start)
        capsys.readouterr()
        code = main(["check", str(project / "envs" / "relative_config_env.py"), "--cassette",
                     str(cassette.parent), "--json"])
        records = json.loads(capsys.readouterr().out)
        by_rule = {r["rule"]: r for r in records}
        assert by_rule["process"]["status"] == "pass", (start, by_rule["process"])
        assert by_rule["rerun"]["status"] == "pass", (start, by_rule["rerun"])
        assert code == 0, (start, _failed(records))


def test_an_openai_type_managed_recording_passes_check(project, monkeypatch, capsys):
    envs = project / "envs"
    monkeypatch.chdir(envs)
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        assert main(["record", "managed_regex_env.py", "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--server-type", "openai", "--", "process",
                     "--env.tokenizer_name", str(bundled_tokenizer_path()),
                     "--env.total_steps", "2", "--env.group_size", "4"]) == 0
    cassette = envs / "cassettes" / "managed_regex_env"
    capsys.readouterr()
    code = main(["check", "managed_regex_env.py", "--cassette", str(cassette), "--json"])
    records = json.loads(capsys.readouterr().out)
    assert code == 0, _failed(records)
    process = next(r for r in records if r["rule"] == "process")
    assert process["status"] == "warn"
    assert "placeholder tokens" in process["message"], process


def test_live_check_takes_env_flags_and_adds_none_the_env_refuses(project, monkeypatch,
                                                                   capsys, tmp_path):
    envs = project / "envs"
    (envs / "sums_config.json").write_text(json.dumps({"pairs": [[3, 4], [10, 20]]}))
    monkeypatch.chdir(envs)
    # offline: no hub; the env's own tokenizer name would reach for it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["check", "relative_config_env.py", "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--json", "--out", str(tmp_path / "kept"), "--",
                     "--env.tokenizer_name", str(bundled_tokenizer_path()),
                     "--env.total_steps", "3", "--env.group_size", "4"])
    records = json.loads(capsys.readouterr().out)
    assert code == 0, _failed(records)
    by_rule = {r["rule"]: r for r in records}
    assert by_rule["process"]["status"] == "pass" and by_rule["evaluate"]["status"] == "pass"
    command = load_cassette(tmp_path / "kept" / "evaluate.jsonl").header.command
    assert "--env.eval_size" not in command
    # the user's flag went through; the recording keeps the bundled tokenizer by its name
    # (portable cassettes, issue 47), not this machine's path to it
    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME

    assert command[command.index("--env.tokenizer_name") + 1] == TOKENIZER_NAME
    # the user's flags replace check's own small-run ones, never doubled
    process = load_cassette(tmp_path / "kept" / "process.jsonl").header.command
    assert process.count("--env.total_steps") == 1
    assert process[process.index("--env.total_steps") + 1] == "3"


def test_check_refuses_env_flags_it_would_not_use(capsys):
    env = str(HERE / "relative_config_env.py")
    assert main(["check", env, "--", "--env.group_size", "2"]) == 2
    assert "with --endpoint and --model" in capsys.readouterr().err
    assert main(["check", env, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--",
                 "process", "--env.group_size", "2"]) == 2
    assert "give only the env's flags after --" in capsys.readouterr().err
