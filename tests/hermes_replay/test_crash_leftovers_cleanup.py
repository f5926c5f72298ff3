"""Leftovers of recordings killed at unlucky instants (seen in the random SIGKILLs of
``test_crash_safety``): a journal killed between its creation and its header line must load
as an empty, incomplete recording; temp files of a killed final rewrite are cleaned up."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay._cassette import load_cassette
from hermes_replay._cassette.verify import verify_file


@pytest.mark.parametrize("content", ["", '{"type": "header", "schema_ver'])
def test_journal_killed_before_its_header_loads_as_empty_and_incomplete(
        tmp_path: Path, content: str) -> None:
    partial = tmp_path / "c.jsonl.partial"
    partial.write_text(content)
    journal = load_cassette(partial)
    assert not journal.complete and journal.interactions == []
    assert [f.message for f in verify_file(partial)] == [
        "interrupted recording (.partial) with 0 complete interaction(s)"]


def test_a_new_recording_removes_temp_files_of_dead_rewriters(tmp_path: Path) -> None:
    """A kill inside the final rewrite leaves ``.<name>.<pid>.tmp``; the next recording of the
    cassette removes those whose process is gone, and leaves a live process's alone."""
    path = tmp_path / "c.jsonl"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".c.jsonl.{dead.pid}.tmp"
    live = tmp_path / f".c.jsonl.{os.getppid()}.tmp"
    other = tmp_path / f".d.jsonl.{dead.pid}.tmp"  # another cassette's: not ours to touch
    for file in (stale, live, other):
        file.write_text('{"type": "header"')
    with hermes_replay.cassette(path, "record"):
        assert not stale.exists()
    assert live.exists() and other.exists() and path.exists()
