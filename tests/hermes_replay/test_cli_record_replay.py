"""record → replay → passthrough through the CLI, in-process, against the scripted endpoint.

The "environment" is a tiny script with the env CLI's shape (``MODE --flag value …``) that calls
the openai SDK inside ``hermes_replay.rollout`` scopes and reports rewards — enough to prove the
CLI wiring without the full base class (tested with a real example env elsewhere).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

TINY_ENV = '''
import json, os, sys
import openai
import hermes_replay
from atroposlib.envs.base import BaseEnv


class TinyEnv(BaseEnv):
    """Never instantiated: replay runs only files that define an environment class."""


def flag(name, default=None):
    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == name:
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def main():
    assert sys.argv[1] == "process", sys.argv
    client = openai.OpenAI(base_url=flag("--openai.base_url"),
                           api_key=flag("--openai.api_key", "none"), max_retries=0)
    steps = int(flag("--env.total_steps", "2"))
    question = os.environ.get("TINY_QUESTION", "What is {i} plus {i}?")
    rows = []
    for i in range(steps):
        with hermes_replay.rollout(f"train-item{i}-0-0") as scope:
            messages = [{"role": "user", "content": question.format(i=i)}]
            try:
                reply = client.chat.completions.create(
                    model=flag("--openai.model_name", "default"), messages=messages,
                    temperature=1.0)
            except openai.APIConnectionError:
                if os.environ.get("TINY_SWALLOW"):  # like an env that scores failures as 0
                    continue
                raise
            text = reply.choices[0].message.content or ""
            messages.append({"role": "assistant", "content": text})
            reward = float(len(text) % 3 == 0) if not os.environ.get("TINY_FLIP") else 0.5
            scope.report(reward=reward, turns_used=1, finished_naturally=True,
                         messages=messages, phase="train")
            rows.append({"id": scope.id, "text": text, "reward": reward})
    out = flag("--env.data_path_to_save_groups")
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as fh:
            fh.write("".join(json.dumps(r, sort_keys=True) + "\\n" for r in rows))
    print("tiny env done")


if __name__ == "__main__":
    main()
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for var in ("TINY_QUESTION", "TINY_FLIP", "TINY_SWALLOW", "HERMES_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "tiny_env.py").write_text(TINY_ENV, encoding="utf-8")
    return tmp_path


def _record(capsys) -> tuple[str, str]:
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        code = main(["record", "envs/tiny_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", "--", "process", "--env.total_steps", "3",
                     "--env.data_path_to_save_groups", "data/recorded.jsonl"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, captured.err


def test_record_then_replay_all_offline(project: Path, capsys) -> None:
    out, _ = _record(capsys)
    cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
    assert cassette.is_file() and not Path(str(cassette) + ".partial").exists()
    assert "3 rollouts recorded · 3 turns · 3 interactions written" in out
    assert f"hermes-replay replay {Path('cassettes/tiny_env/process.jsonl')}" in out
    header = json.loads(cassette.read_text(encoding="utf-8").splitlines()[0])
    assert header["env_file"] == "envs/tiny_env.py"
    assert header["command"][:3] == ["process", "--env.total_steps", "3"]
    assert "--openai.model_name" in header["command"] and header["model"] == "scripted"
    recorded = (project / "data" / "recorded.jsonl").read_text(encoding="utf-8")

    # the endpoint is gone: replay the default ./cassettes folder
    assert main(["replay", "--out", "replayed"]) == 0
    out = capsys.readouterr().out
    assert "3 rollouts replayed · 3 turns · 0 misses · 0 unused recordings" in out
    assert "reward changed" not in out
    table = out[out.index("cassette "):]
    assert "cassettes/tiny_env/process.jsonl  process" in table and " ok" in table
    replayed = project / "replayed" / "tiny_env" / "process" / "recorded.jsonl"
    assert replayed.read_text(encoding="utf-8") == recorded  # byte-identical
    assert "tiny env done" in (replayed.parent / "env.log").read_text(encoding="utf-8")


def test_replay_reports_changed_rewards_and_misses(project: Path, capsys, monkeypatch) -> None:
    _record(capsys)
    monkeypatch.setenv("TINY_FLIP", "1")
    assert main(["replay", "cassettes", "--out", "r1"]) == 0
    out = capsys.readouterr().out
    assert "reward changed train-item0-0-0" in out and "CHANGED" in out
    assert main(["replay", "cassettes", "--out", "r2", "--fail-on-change"]) == 1
    capsys.readouterr()

    monkeypatch.delenv("TINY_FLIP")
    monkeypatch.setenv("TINY_QUESTION", "What is {i} times {i}?")
    assert main(["replay", "cassettes", "--out", "r3"]) == 1
    captured = capsys.readouterr()
    assert "MISS" in captured.out
    assert "no matching recording" in captured.err and "train-item0-0-0" in captured.err


def test_replay_env_form_and_strict(project: Path, capsys) -> None:
    _record(capsys)
    assert main(["replay", "envs/tiny_env.py", "--", "process", "--env.total_steps", "3"]) == 0
    assert "3 rollouts replayed" in capsys.readouterr().out
    # fewer rollouts than recorded, because the user asked for fewer: reported as unused;
    # --strict makes it fail (replaying the recorded command itself must run them all)
    assert main(["replay", "envs/tiny_env.py", "--", "process", "--env.total_steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "1 unused recordings" in out and "unused: train-item2-0-0#0" in out
    assert main(["replay", "envs/tiny_env.py", "--strict", "--", "process",
                 "--env.total_steps", "2"]) == 1
    # ... but a command that runs none of them is never a pass
    assert main(["replay", "envs/tiny_env.py", "--", "process", "--env.total_steps", "0"]) == 1
    err = capsys.readouterr().err
    assert "ran 0 of the 3 recorded rollouts" in err and "3 of 3 recorded rollout(s)" in err
    assert main(["replay", "envs/tiny_env.py", "--cassette", "nope.jsonl", "--", "process"]) == 2
    assert "no cassette at nope.jsonl" in capsys.readouterr().err


def test_passthrough_writes_nothing(project: Path, capsys) -> None:
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        code = main(["passthrough", "envs/tiny_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", "--", "process", "--env.total_steps", "2"])
        assert len(ep.requests) >= 2
    assert code == 0
    assert "2 rollouts ran live" in capsys.readouterr().out
    assert not (project / "cassettes").exists()


def test_failed_recording_keeps_previous_cassette(project: Path, capsys) -> None:
    _record(capsys)
    cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
    before = cassette.read_bytes()
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        # the tiny env only knows `process`: it crashes, and the old cassette must survive
        code = main(["record", "envs/tiny_env.py", "--cassette", str(cassette), "--endpoint",
                     ep.base_url, "--model", "scripted", "--", "evaluate"])
    captured = capsys.readouterr()
    assert code == 1
    assert "AssertionError" in captured.err
    assert "previous cassette (if any) was left as it was" in captured.out
    assert cassette.read_bytes() == before


def test_recording_nothing_keeps_previous_cassette(project: Path, capsys, monkeypatch) -> None:
    _record(capsys)
    cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
    before = cassette.read_bytes()
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        dead = ep.base_url  # nothing listens here once the block has exited
    monkeypatch.setenv("TINY_SWALLOW", "1")
    code = main(["record", "envs/tiny_env.py", "--endpoint", dead, "--model", "scripted",
                 "--", "process", "--env.total_steps", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "no LLM request was recorded" in out and "check the endpoint" in out
    assert cassette.read_bytes() == before


EXAMPLE_ENV = Path(__file__).resolve().parents[2] / "environments" / "terminal_test_env.py"


@pytest.mark.slow
def test_example_env_record_then_replay_is_byte_identical(tmp_path, monkeypatch, capsys) -> None:
    """A real example env through the CLI: process output identical live and replayed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    # inside the project, as replay of a folder requires (its imports resolve to the package)
    (tmp_path / "environments").mkdir()
    env_copy = tmp_path / "environments" / EXAMPLE_ENV.name
    env_copy.write_bytes(EXAMPLE_ENV.read_bytes())
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["record", "environments/terminal_test_env.py", "--endpoint", ep.base_url,
                     "--model", "scripted", "--", "process", "--env.total_steps", "2",
                     "--env.group_size", "4", "--env.data_path_to_save_groups", "data/g.jsonl"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "8 rollouts recorded" in out
    live = (tmp_path / "data" / "g.jsonl").read_bytes()
    assert live.count(b"\n") == 2  # two scored groups
    # The endpoint is stopped: replay twice, each byte-identical to the live run.
    for out_dir in ("replayed", "replayed-again"):
        assert main(["replay", "--out", out_dir]) == 0
        out = capsys.readouterr().out
        assert "8 rollouts replayed" in out and "0 misses · 0 unused recordings" in out
        replayed = tmp_path / out_dir / "terminal_test_env" / "process" / "g.jsonl"
        assert replayed.read_bytes() == live
    assert main(["ls"]) == 0
    listing = capsys.readouterr().out
    assert "env terminal-test" in listing and "8 rollouts" in listing


def test_replay_all_from_another_directory_runs_where_recorded(project: Path, capsys,
                                                              monkeypatch) -> None:
    _record(capsys)
    (project / "pyproject.toml").write_text("", encoding="utf-8")  # marks the project root
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    assert main(["replay", "../cassettes", "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "3 rollouts replayed" in out and "../cassettes/tiny_env/process.jsonl" in out
    assert (project / "sub" / "out" / "tiny_env" / "process" / "recorded.jsonl").is_file()
    assert Path.cwd() == project / "sub"
