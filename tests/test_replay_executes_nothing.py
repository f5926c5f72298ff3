"""Replay executes nothing a cassette says unless asked: a cassette recorded against a hostile
endpoint touches nothing, and a hand-edited tool call is a miss that runs nothing. (Every
shipped cassette replays with sandbox creation made impossible: ``test_shipped_cassettes``,
in the same replay that checks its rewards and snapshot.)

With ``tools="execute"`` the same cassettes run their tools again and still reproduce every
recorded reward (the tool results of the examples are deterministic).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _sandbox_creations import SandboxCreations

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import Reply, Rule, Script, ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = sorted((ROOT / "cassettes").glob("*/*.jsonl"))


def test_the_shipped_cassettes_hold_tool_calls() -> None:
    counts = {p.parent.name + "/" + p.stem: len(load_cassette(p).tool_calls) for p in CASSETTES}
    assert counts["terminal_test_env/process"] > 10, counts
    assert sum(counts.values()) > 20, counts  # the tests below are not vacuous


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_shipped_cassettes_replay_green_with_tools_executed(
        path: Path, replay_run, monkeypatch: pytest.MonkeyPatch) -> None:
    creations = SandboxCreations(monkeypatch, fail=False)
    result = replay_run(path, strict=True, tools="execute")
    assert result.exit_code == 0, (result.out_dir / "env.log").read_text()[-3000:]
    assert not result.misses and not result.unused
    assert result.rewards and result.changed_rewards() == {}
    assert (creations.count > 0) == bool(load_cassette(path).tool_calls)


def _hostile_script(marker: Path) -> Script:
    """A "model" that answers every task with a command writing outside the workspace."""

    def reply(conv: Any, rng: Any) -> Reply:
        if conv.tool_results:
            return Reply(content="Done.")
        return Reply(content="Let me set things up.",
                     tool_calls=[("terminal", {"command": f"touch {marker}"})])

    return Script("hostile", [Rule("touch-marker", lambda conv: True, reply)])


def test_a_cassette_from_a_hostile_endpoint_replays_without_running_its_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"  # a project of its own: replay runs env files inside it
    (project / "envs").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "envs" / "coding_env.py").write_text(
        "from environments.terminal_test_env import TerminalTestEnv\n\n"
        "if __name__ == '__main__':\n    TerminalTestEnv.cli()\n")
    monkeypatch.chdir(project)
    marker = tmp_path / "outside" / "marker"
    marker.parent.mkdir()
    cassette = project / "hostile.jsonl"
    with ScriptedEndpoint(script=_hostile_script(marker)) as ep:
        assert main(["record", "envs/coding_env.py", "--cassette", str(cassette),
                     "--endpoint", ep.base_url, "--model", "hostile", "--", "process",
                     "--env.total_steps", "1", "--env.group_size", "2",
                     "--env.data_path_to_save_groups", str(tmp_path / "rec" / "g.jsonl")]) == 0
    commands = [c.arguments.get("command") for c in load_cassette(cassette).tool_calls
                if c.source == "agent"]
    assert commands == [f"touch {marker}"] * 2  # one per rollout, recorded as the model sent it
    marker.unlink(missing_ok=True)  # whatever recording did (isolation is another test's job)

    creations = SandboxCreations(monkeypatch, fail=True)
    assert main(["replay", str(cassette), "--out", str(tmp_path / "out"), "--strict"]) == 0
    assert not marker.exists()
    assert creations.count == 0


def test_a_hand_edited_tool_call_is_a_miss_and_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The cassette says the agent ran another command than the model's reply asks for: the
    replay misses at that tool call (field diff, exit 1), executes neither command."""
    path = tmp_path / "edited.jsonl"
    original = ROOT / "cassettes" / "terminal_test_env" / "evaluate.jsonl"
    lines = original.read_text().splitlines()
    edited = False
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "tool" and record["source"] == "agent" and not edited:
            record["arguments"]["command"] = "echo edited"
            lines[i], edited = json.dumps(record), True
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(ROOT)
    creations = SandboxCreations(monkeypatch, fail=True)
    assert main(["replay", "environments/terminal_test_env.py", "--cassette", str(path), "--",
                 "evaluate", "--env.data_dir_to_save_evals", str(tmp_path / "evals")]) == 1
    err = capsys.readouterr().err
    assert "TOOL terminal (tool call 0, agent); nothing was executed" in err
    assert '-tool.arguments.command: "echo edited"' in err
    assert "--tools execute" in err
    assert creations.count == 0
