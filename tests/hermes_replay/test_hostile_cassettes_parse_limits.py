"""Hostile cassettes at the limits of parsing: deep nesting, huge integers, invalid UTF-8,
control characters in ids, planted symlinks.

Same contract as ``test_hostile_cassettes``: a ``CassetteError`` naming file:line and the
next step; nothing executed; nothing outside the cassette's folder touched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reliability_helpers import record_sample

import hermes_replay
from hermes_replay._cassette import load_cassette

HEADER = json.dumps({"type": "header", "schema_version": 1})


def _expect_error_at(path: Path, line: int) -> hermes_replay.CassetteError:
    with pytest.raises(hermes_replay.CassetteError) as info:
        load_cassette(path)
    assert info.value.line == line, str(info.value)
    assert str(info.value).startswith(f"{path}:{line}: ") and "next step:" in str(info.value)
    return info.value


def test_deeply_nested_json_is_a_cassette_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(HEADER + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    _expect_error_at(path, 2)  # was: RecursionError escaping load_cassette


def test_integer_too_long_to_convert_is_a_cassette_error(tmp_path: Path) -> None:
    path = tmp_path / "bigint.jsonl"
    path.write_text(HEADER + '\n{"type": "interaction", "rollout": "r", "seq": '
                    + "7" * 5000 + ', "request": {}, "response": {}}\n')
    _expect_error_at(path, 2)  # was: ValueError (int max str digits) escaping load_cassette


def test_invalid_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "binary.jsonl"
    path.write_bytes(HEADER.encode() + b"\n" + b'{"type": "blob", "id": "a", "value": "\xff\xfe"}'
                     + b"\n")
    _expect_error_at(path, 2)  # was: no line number


@pytest.mark.parametrize("rollout", ["r\u001b[2J\u001b[31mFAKE", "r\u0000x", "r\nfake"])
def test_rollout_id_with_control_characters_is_rejected(tmp_path: Path, rollout: str) -> None:
    """Ids are printed by ``ls``/``show``/miss reports: escape sequences would rewrite the
    reader's terminal."""
    record = {"type": "interaction", "rollout": rollout, "seq": 0, "kind": "chat",
              "request": {"method": "POST", "url": "http://h/v1/chat/completions",
                          "headers": {}, "body": {"messages": []}},
              "response": {"status": 200, "headers": {}, "body": {}}}
    path = tmp_path / "ids.jsonl"
    path.write_text(HEADER + "\n" + json.dumps(record) + "\n")
    error = _expect_error_at(path, 2)
    assert "rollout" in error.reason


def test_planted_partial_symlink_is_never_written_through(tmp_path: Path) -> None:
    """A ``<cassette>.partial`` left as a link to a file elsewhere must not be truncated or
    overwritten by the next recording."""
    victim = tmp_path / "outside" / "important.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    folder = tmp_path / "cassettes"
    folder.mkdir()
    (folder / "c.jsonl.partial").symlink_to(victim)
    try:
        record_sample(folder / "c.jsonl", rollouts=1, turns=1)
    except hermes_replay.CassetteError as exc:  # refusing is fine, if it says where
        assert "c.jsonl.partial" in str(exc) and "next step" in str(exc)
    assert victim.read_text() == "precious\n"
