"""A recording killed in the instant between creating ``<path>.partial`` and writing its
header line leaves an empty (or torn-header) journal; it must load as an empty, incomplete
recording like any other interrupted one (seen once in 40 random SIGKILLs of
``test_crash_safety``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_replay._cassette import load_cassette
from hermes_replay._verify import verify_file


@pytest.mark.parametrize("content", ["", '{"type": "header", "schema_ver'])
def test_journal_killed_before_its_header_loads_as_empty_and_incomplete(
        tmp_path: Path, content: str) -> None:
    partial = tmp_path / "c.jsonl.partial"
    partial.write_text(content)
    journal = load_cassette(partial)
    assert not journal.complete and journal.interactions == []
    assert [f.message for f in verify_file(partial)] == [
        "interrupted recording (.partial) with 0 complete interaction(s)"]
