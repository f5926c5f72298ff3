"""A cassette travels: recorded in one project path and venv, replayed from a copy elsewhere.

Each test records a plain env against the scripted endpoint in project A, copies A to B at
another path, deletes A (and the "venv" folder the recording's tokenizer came from), then
replays from B with B trusted the way CI trusts a clone (``HERMES_REPLAY_TRUST``).

A real second venv is not built (minutes of install for one assertion). The equivalent: what
a second venv changes is the tokenizer folder's path, so the recording names one that is then
deleted (a tokenizer folder under a fake ``venv-a/…/site-packages``), and, for cassettes
recorded before the bundled tokenizer was written by name, the command is made to name the
bundled tokenizer inside a venv that no longer exists.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hermes_replay import bundled_tokenizer_path, load_cassette
from hermes_replay._tokenizers.bundled import TOKENIZER_NAME
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

ENV = '''
import json

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from pydantic import Field


class SumsConfig(BaseEnvConfig):
    items_path: str = Field("items.json", description="a JSON list of [a, b] pairs")


class SumsEnv(BaseEnv):
    name = "sums"
    env_config_cls = SumsConfig

    @classmethod
    def config_init(cls):
        config = SumsConfig(tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                            group_size=2, use_wandb=True, total_steps=1, batch_size=4,
                            max_token_length=512, wandb_name="sums")
        return config, [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                        api_key="")]

    async def setup(self):
        with open(self.config.items_path, encoding="utf-8") as fh:
            self.items = json.load(fh)
        self.i = 0

    async def get_next_item(self):
        item = tuple(self.items[self.i % len(self.items)])
        self.i += 1
        return item

    async def collect_trajectories(self, item):
        messages = [{"role": "user", "content": f"What is {item[0]} + {item[1]}?"}]
        completions = await self.server.chat_completion(
            messages=messages, n=self.config.group_size, max_tokens=64)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completions.choices:
            text = choice.message.content or ""
            out = tokenize_for_trainer(
                self.tokenizer, messages + [{"role": "assistant", "content": text}],
                choice.finish_reason)
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0 if str(sum(item)) in text else 0.0)
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    SumsEnv.cli()
'''

CASSETTE = Path("cassettes/sums/process.jsonl")


def _project(root: Path) -> Path:
    (root / "envs").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'sums'\nversion = '0'\n")
    (root / "envs" / "sums_env.py").write_text(ENV, encoding="utf-8")
    (root / "data" / "items.json").write_text("[[2, 3], [40, 2]]", encoding="utf-8")
    return root


def _record(project: Path, tokenizer: str, items: str, monkeypatch, capsys) -> dict:
    monkeypatch.chdir(project)
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        code = main(["record", "envs/sums_env.py", "--cassette", str(CASSETTE), "--endpoint",
                     endpoint.base_url, "--model", "scripted", "--", "process",
                     "--env.tokenizer_name", tokenizer, "--env.items_path", items,
                     "--env.total_steps", "1", "--env.group_size", "2",
                     "--env.data_path_to_save_groups", "out/groups.jsonl"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    return load_cassette(project / CASSETTE).header.model_dump()


def _moved(project: Path, tmp_path: Path, monkeypatch) -> Path:
    """A copy of the project at another path, the original deleted, the copy trusted."""
    other = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(project, other)
    shutil.rmtree(project)
    monkeypatch.chdir(other)
    monkeypatch.setenv("HERMES_REPLAY_TRUST", str(other))
    return other


def _replay(tmp_path: Path, capsys) -> tuple[int, str]:
    code = main(["replay", "cassettes", "--out", str(tmp_path / "out"), "--no-report", "-j", "1"])
    out = capsys.readouterr()
    return code, out.out + out.err


def _rewrite_command(cassette: Path, change) -> None:
    lines = cassette.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["command"] = change(header["command"])
    lines[0] = json.dumps(header) + "\n"
    cassette.write_text("".join(lines), encoding="utf-8")


def test_a_recording_keeps_no_path_of_its_machine_and_replays_from_a_copy(
        tmp_path, monkeypatch, capsys):
    project = _project(tmp_path / "a" / "proj")
    header = _record(project, bundled_tokenizer_path(), str(project / "data" / "items.json"),
                     monkeypatch, capsys)
    command = header["command"]
    assert command[command.index("--env.tokenizer_name") + 1] == TOKENIZER_NAME
    assert command[command.index("--env.items_path") + 1] == "data/items.json"
    assert [arg for arg in command if arg.startswith("/") or str(tmp_path) in arg] == []
    _moved(project, tmp_path, monkeypatch)
    code, out = _replay(tmp_path, capsys)
    assert code == 0, out[-3000:]
    assert "0 misses" in out


def test_a_command_naming_the_bundled_tokenizer_in_a_venv_that_is_gone_still_replays(
        tmp_path, monkeypatch, capsys):
    """A cassette recorded before the name was written: its command holds a venv's path."""
    project = _project(tmp_path / "a" / "proj")
    _record(project, bundled_tokenizer_path(), "data/items.json", monkeypatch, capsys)
    gone = str(tmp_path / "venv-a/lib/python3.11/site-packages/hermes_replay/assets/tokenizer")
    def in_gone_venv(argv: list[str]) -> list[str]:
        argv[argv.index("--env.tokenizer_name") + 1] = gone
        return argv

    _rewrite_command(project / CASSETTE, in_gone_venv)
    other = _moved(project, tmp_path, monkeypatch)
    assert gone in load_cassette(other / CASSETTE).header.command
    code, out = _replay(tmp_path, capsys)
    assert code == 0, out[-3000:]
    assert "HFValidationError" not in out


def _own_tokenizer(folder: Path) -> Path:
    """A tokenizer folder of its own (not byte-equal to the bundled one: another fingerprint,
    so only the cassette's stored copy can stand in for it)."""
    shutil.copytree(bundled_tokenizer_path(), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["model_max_length"] = 4096
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_a_tokenizer_folder_gone_at_replay_is_served_from_the_stored_copy(
        tmp_path, monkeypatch, capsys):
    venv = tmp_path / "venv-a"
    tokenizer = _own_tokenizer(venv / "lib/python3.11/site-packages/own/tokenizer")
    project = _project(tmp_path / "a" / "proj")
    header = _record(project, str(tokenizer), "data/items.json", monkeypatch, capsys)
    assert header["tokenizer"]["store"]  # the recording kept a copy beside the cassettes
    shutil.rmtree(venv)
    other = _moved(project, tmp_path, monkeypatch)
    code, out = _replay(tmp_path, capsys)
    assert code == 0, out[-3000:]
    # without the stored copy there is nothing with the recorded fingerprint: named, with the fix
    shutil.rmtree(other / "cassettes" / ".tokenizers")
    code, out = _replay(tmp_path / "again", capsys)
    assert code == 1
    assert f"--env.tokenizer_name {tokenizer}, which is not on this machine" in out
    assert "--cassette" in out and "re-record" in out


def test_a_path_outside_the_project_gone_at_replay_is_named_with_the_fix(
        tmp_path, monkeypatch, capsys):
    items = tmp_path / "datasets" / "items.json"
    items.parent.mkdir()
    items.write_text("[[1, 1]]", encoding="utf-8")
    project = _project(tmp_path / "a" / "proj")
    header = _record(project, bundled_tokenizer_path(), str(items), monkeypatch, capsys)
    assert str(items) in header["command"]  # outside the project: kept, checked at replay
    shutil.rmtree(items.parent)
    _moved(project, tmp_path, monkeypatch)
    code, out = _replay(tmp_path, capsys)
    assert code == 1
    assert f"--env.items_path {items}, which is not on this machine" in out
    assert "-- MODE … --env.items_path PATH" in out
