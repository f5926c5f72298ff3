"""A request body edited by hand, its old fingerprint left in place, is never taken as genuine
(issue 25, item 9): replay does not answer the live request from it, ``verify`` reports it at
its line, and ``show`` marks it."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

import hermes_replay
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

CASSETTE = "cassettes/calc_tool_env/process.jsonl"
EDIT = "EDITED BY HAND"


def _edit_first_user_message(path: Path) -> tuple[int, str]:
    """Rewrite the first recorded user message, keeping every fingerprint; returns the line
    (1-based) and the rollout of the edited interaction."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        record = json.loads(line)
        if record.get("type") != "interaction":
            continue
        messages = record["request"]["body"]["messages"]
        user = next(m for m in messages if m["role"] == "user")
        user["content"] = EDIT + " " + user["content"]
        lines[number - 1] = json.dumps(record, ensure_ascii=False)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return number, record["rollout"]
    raise AssertionError("no interaction in the cassette")


def test_core_replay_does_not_answer_from_an_edited_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    with ScriptedEndpoint(script="generic", seed=1) as ep:
        base = ep.base_url
        client = openai.OpenAI(base_url=base, api_key="sk-test-0000", max_retries=0)
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r0"):
            client.chat.completions.create(model="m", messages=messages)
    line, _ = _edit_first_user_message(path)
    with pytest.raises(hermes_replay.CassetteMiss) as caught:
        with hermes_replay.cassette(path, "replay", strict=True), hermes_replay.rollout("r0"):
            client.chat.completions.create(model="m", messages=messages)
    text = str(caught.value)
    assert f"{path}:{line}" in text and "was edited after it was recorded" in text
    assert EDIT in text  # the diff against the recording shows the edit itself


def test_replay_strict_fails_naming_the_cassette_and_line(
        calc_project: Path, capsys: pytest.CaptureFixture) -> None:
    line, _ = _edit_first_user_message(calc_project / CASSETTE)
    assert main(["replay", CASSETTE, "--strict", "--out", "out", "--no-report"]) == 1
    out = "".join(capsys.readouterr())
    assert f"process.jsonl:{line}" in out, out
    assert "was edited after it was recorded" in out


def test_verify_reports_the_edited_line(calc_project: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    assert main(["verify", CASSETTE]) == 0  # as recorded: nothing to report
    capsys.readouterr()
    line, _ = _edit_first_user_message(calc_project / CASSETTE)
    assert main(["verify", CASSETTE]) == 1
    out = capsys.readouterr().out
    assert f"{CASSETTE}:{line}: integrity: the request of rollout" in out, out
    assert "was edited after it was recorded" in out


def test_show_marks_the_edited_turn(calc_project: Path, capsys: pytest.CaptureFixture) -> None:
    _, rollout = _edit_first_user_message(calc_project / CASSETTE)
    assert main(["show", CASSETTE, "--rollout", rollout, "--turn", "1"]) == 0
    out = capsys.readouterr().out
    assert EDIT in out
    assert "edited after it was recorded" in out, out
