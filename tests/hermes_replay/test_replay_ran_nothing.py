"""A replay that ran nothing never passes, whichever way it is run (issue 36, finding 24).

The cassette: ``calc_tool_env``'s recording cut to its header line, whose recorded command
runs no step (``--env.total_steps 0``). Before, ``replay --strict`` said ``ok`` with 0
rollouts, ``verify`` found nothing, ``--twice`` said the runs agreed and ``-j 2`` passed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _calc_project import CASSETTE_REL, edit_command, keep_only_header

import environments.hermes_base_env  # noqa: F401  (numpy once per process, see the plugin tests)
from hermes_replay.cli import main

SAYS = "the cassette holds no recording and the run made no request"


def _empty_cassette(project: Path, name: str = "empty") -> Path:
    cassette = project / "cassettes" / name / "process.jsonl"
    cassette.parent.mkdir(parents=True)
    shutil.copy(project / CASSETTE_REL, cassette)
    keep_only_header(cassette)
    edit_command(cassette, lambda argv: [*argv, "--env.total_steps", "0"])
    return cassette


def test_strict_replay_of_a_header_only_cassette_fails(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = _empty_cassette(calc_project)
    assert main(["replay", str(cassette.relative_to(calc_project)), "--strict",
                 "--out", "out", "--no-report"]) == 1
    captured = capsys.readouterr()
    assert SAYS in captured.err and "next step:" in captured.err
    assert " ok" not in captured.out


def test_a_folder_with_it_fails_in_workers_and_twice(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _empty_cassette(calc_project)
    (calc_project / CASSETTE_REL).unlink()
    assert main(["replay", "cassettes", "-j", "2", "--out", "out-j", "--no-report"]) == 1
    captured = capsys.readouterr()
    row = next(line for line in captured.out.splitlines()
               if line.startswith("cassettes/empty/process.jsonl"))
    assert row.rstrip().endswith("ERROR"), row
    assert SAYS in captured.err
    assert main(["replay", "cassettes/empty/process.jsonl", "--twice", "--out", "out-2",
                 "--no-report"]) == 1
    captured = capsys.readouterr()
    assert SAYS in captured.err + captured.out
    assert "0 of 1 cassette(s) replay the same twice" in captured.out


def test_verify_flags_a_cassette_that_holds_no_recording(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = _empty_cassette(calc_project)
    assert main(["verify", str(cassette)]) == 1
    assert "holds no recording" in capsys.readouterr().out
