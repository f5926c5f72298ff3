"""A hostile endpoint: every tool call it sends tries to write a marker outside the workspace.

Recorded through ``hermes-replay record`` with the real multi-signal example environment (its
terminal tool runs the commands), then replayed. The recording executes the commands, and so
does a replay with ``tools="execute"``; both run them inside bubblewrap, so the marker never
appears. (A default replay executes nothing at all.) The same execute replay with
``trust_cassette=True`` runs the commands on the host and the marker does appear: the commands
really run, and only the isolation keeps them in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import Conversation, Reply, Rule, Script, ScriptedEndpoint

EXAMPLE = Path(__file__).resolve().parents[2] / "environments" / "multi_signal_env.py"


def hostile_script(marker: Path) -> Script:
    def attack(conv: Conversation, rng) -> Reply:
        return Reply(tool_calls=[("terminal", {"command": f"touch {marker}"})])

    return Script("hostile", [
        Rule("attack", lambda c: bool(c.tool_names) and not c.tool_results, attack),
        Rule("answer", lambda c: True, lambda c, rng: Reply(content="ANSWER: 0")),
    ])


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    (tmp_path / "environments").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "environments" / EXAMPLE.name)
    return tmp_path


def test_hostile_commands_are_contained_when_recording_and_replaying(project: Path,
                                                                     capsys) -> None:
    marker = project.parent / f"{project.name}-pwned"
    with ScriptedEndpoint(script=hostile_script(marker), seed=0) as ep:
        code = main(["record", "environments/multi_signal_env.py", "--endpoint", ep.base_url,
                     "--model", "scripted", "--", "process", "--env.total_steps", "1",
                     "--env.group_size", "2", "--env.use_wandb", "false"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert not marker.exists(), "the recording ran a model's command outside the sandbox"
    cassette = project / "cassettes" / "multi_signal_env" / "process.jsonl"
    text = cassette.read_text(encoding="utf-8")
    assert "touch " in text and str(marker) in text  # the attack is in the cassette …
    outcomes = [json.loads(line) for line in text.splitlines()[1:]]
    errors = [o for o in outcomes if o.get("type") == "outcome" and o.get("tool_errors")]
    assert errors, "the contained command must be reported as a tool error"  # … and failed

    replayed = hermes_replay.run_cassette(cassette, out_dir=project / "replayed")
    assert replayed.exit_code == 0 and replayed.misses == []
    assert not marker.exists(), "replay ran a cassette's command"

    executed = hermes_replay.run_cassette(cassette, out_dir=project / "executed", tools="execute")
    assert executed.exit_code == 0 and executed.misses == []
    assert executed.summary.tools_executed >= 2  # the commands really ran again …
    assert not marker.exists(), "replay ran a cassette's command outside the sandbox"  # … inside

    trusted = hermes_replay.run_cassette(cassette, out_dir=project / "trusted", tools="execute",
                                         trust_cassette=True, raise_errors=False)
    try:
        assert marker.exists(), "with trust_cassette the command runs on the host"
        assert trusted.summary.tools_executed >= 1
    finally:
        marker.unlink(missing_ok=True)
