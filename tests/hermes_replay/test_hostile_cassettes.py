"""Hostile or broken cassettes: a ``CassetteError`` naming file:line and the next step;
nothing in them is executed and nothing outside the cassette's folder is touched.

Every case is read by ``load_cassette`` and opened by ``cassette(mode="replay")`` and
``cassette(mode="auto")``: none may install interception or rewrite the damaged file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _reliability_helpers import read_records, record_sample

import hermes_replay
from hermes_replay._cassette import load_cassette
from hermes_replay._session import intercept as _intercept
from hermes_replay.cli import main

MARKER = "PWNED_MARKER"


@pytest.fixture(scope="module")
def sample_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("hostile") / "sample.jsonl"
    record_sample(path, rollouts=2, turns=2)
    return path.read_text(encoding="utf-8").splitlines()


def _first_interaction(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if '"type": "interaction"' in line)


def _replace_record(lines: list[str], index: int, change: Callable[[dict], Any]) -> list[str]:
    out = list(lines)
    record = json.loads(out[index])
    change(record)
    out[index] = json.dumps(record)
    return out


def _hdr(**fields: Any) -> Callable[[list[str]], tuple[list[str], int]]:
    def build(lines: list[str]) -> tuple[list[str], int]:
        return _replace_record(lines, 0, lambda r: r.update(fields)), 1
    return build


def _inter(change: Callable[[dict], Any]) -> Callable[[list[str]], tuple[list[str], int]]:
    def build(lines: list[str]) -> tuple[list[str], int]:
        i = _first_interaction(lines)
        return _replace_record(lines, i, change), i + 1
    return build


def _insert(text: str, at: int = 2) -> Callable[[list[str]], tuple[list[str], int]]:
    def build(lines: list[str]) -> tuple[list[str], int]:
        return [*lines[:at], text, *lines[at:]], at + 1
    return build


def _truncated(lines: list[str]) -> tuple[list[str], int]:
    i = _first_interaction(lines) + 1
    return [*lines[:i], lines[i][: len(lines[i]) // 2]], i + 1


def _set_status(r: dict) -> None:
    r["response"] = "200 OK"


def _yaml(lines: list[str]) -> tuple[list[str], int]:
    return [f"!!python/object/apply:os.system ['touch {MARKER}']", *lines[1:]], 1


# (name, builder) -> builder(lines) gives (new lines, the line the error must name)
CASES: dict[str, Callable[[list[str]], tuple[list[str], int]]] = {
    "truncated mid-line": _truncated,
    "invalid JSON": _insert('{"type": "interaction", "rollout": "r0", seq: 0}'),
    "not an object": _insert('["interaction", "r0", 0]'),
    "unknown schema version": _hdr(schema_version=999),
    "schema version as text": _hdr(schema_version="1"),
    "header is not first": lambda ls: ([ls[1], ls[0], *ls[2:]], 1),
    "unknown record type": _insert('{"type": "exec", "cmd": "touch ' + MARKER + '"}'),
    "seq is a string": _inter(lambda r: r.update(seq="first")),
    "rollout is a list": _inter(lambda r: r.update(rollout=["r0"])),
    "request is a string": _inter(lambda r: r.update(request="POST /v1")),
    "response is a string": _inter(_set_status),
    "header command is a dict": _hdr(command={"run": "x"}),
    "blob without id": _insert('{"type": "blob", "value": "x"}'),
    "dangling blob reference": _inter(lambda r: r["request"].update(body={"$blob": "feed"})),
    "delta to an unknown turn": _inter(lambda r: r["request"].update(
        body={"messages": {"$delta": {"prev": 9, "keep": 1, "append": []}}})),
    "outcome without rollout": _insert('{"type": "outcome", "reward": 1.0}'),
    "annotate fields not a dict": _insert('{"type": "annotate", "fields": ["x"]}'),
    "raw NUL byte": _insert('{"type": "blob", "id": "a\x00b", "value": 1}'),
    "YAML python tag": _yaml,
    "enormous field then garbage": _insert('{"type": "blob", "id": "big", "value": "'
                                           + "A" * 5_000_000 + '"'),
}


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its content hash (and the link target of symlinks)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_cassette_gives_cassette_error_at_its_line(
        name: str, sample_lines: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "cassettes"
    folder.mkdir()
    (tmp_path / "outside.txt").write_text("keep me\n")
    lines, line = CASES[name](sample_lines)
    path = folder / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = _snapshot(tmp_path)

    with pytest.raises(hermes_replay.CassetteError) as info:
        load_cassette(path)
    err = info.value
    assert err.path == path and err.line == line, str(err)
    assert str(err).startswith(f"{path}:{line}: ")
    assert "next step:" in str(err)

    for mode in ("replay", "auto"):
        with pytest.raises(hermes_replay.CassetteError):
            with hermes_replay.cassette(path, mode):
                pass
        assert _intercept.installed() == ()  # a failed start leaves nothing patched

    assert not (tmp_path / MARKER).exists()
    assert _snapshot(tmp_path) == before  # the damaged file was not rewritten; nothing added


def test_tag_like_values_stay_inert_data(sample_lines: list[str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """YAML / jsonpickle / python-object tags inside valid JSON are plain strings and dicts."""
    monkeypatch.chdir(tmp_path)
    i = _first_interaction(sample_lines)
    tags = {"!!python/object/apply:os.system": [f"touch {MARKER}"],
            "py/object": "os.system", "py/reduce": [{"py/function": "os.system"}],
            "__class__": "subprocess.Popen", "$type": "System.Diagnostics.Process"}

    def poison(r: dict) -> None:
        r["request"]["body"]["metadata"] = tags
        r["response"]["body"]["choices"][0]["message"]["content"] = \
            f"!!python/object/apply:os.system ['touch {MARKER}']"

    lines = _replace_record(sample_lines, i, poison)
    lines[0] = json.dumps({**json.loads(lines[0]), "extra": tags})
    path = tmp_path / "tags.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cassette = load_cassette(path)
    assert cassette.interactions[0].request["body"]["metadata"] == tags
    assert cassette.header.extra == tags
    assert not (tmp_path / MARKER).exists()


def test_symlinked_cassette_pointing_outside_is_read_not_written(
        sample_lines: list[str], tmp_path: Path) -> None:
    """Reading through a link to a non-cassette fails at line 1; re-recording replaces the
    link itself and never writes through it."""
    victim = tmp_path / "outside" / "passwd"
    victim.parent.mkdir()
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    folder = tmp_path / "cassettes"
    folder.mkdir()
    link = folder / "c.jsonl"
    link.symlink_to(victim)
    with pytest.raises(hermes_replay.CassetteError) as info:
        load_cassette(link)
    assert info.value.line == 1 and f"{link}:1: not valid JSON" in str(info.value)
    record_sample(link, rollouts=1, turns=1)
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    assert not link.is_symlink() and load_cassette(link).complete


def test_rollout_ids_with_traversal_are_never_used_as_paths(
        sample_lines: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollout ids are data: replaying and re-recording (auto) a cassette whose ids look like
    paths writes nothing but the cassette itself."""
    monkeypatch.chdir(tmp_path)
    lines = [json.dumps({**json.loads(line), "rollout": "../../escaped"})
             if '"rollout": "r0"' in line else line for line in sample_lines]
    folder = tmp_path / "deep" / "cassettes"
    folder.mkdir(parents=True)
    path = folder / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "../../escaped" in load_cassette(path).rollouts
    before = set(_snapshot(tmp_path))
    with hermes_replay.cassette(path, "auto"):
        pass
    assert set(_snapshot(tmp_path)) == before
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "deep" / "escaped").exists()
    assert "../../escaped" in {r["rollout"] for r in read_records(path)
                               if r["type"] == "interaction"}


def test_enormous_valid_field_loads_and_round_trips(sample_lines: list[str],
                                                   tmp_path: Path) -> None:
    """A 20 MB tool output is data, not an attack: it loads whole (no silent cut)."""
    huge = "x" * 20_000_000
    i = _first_interaction(sample_lines)
    lines = _replace_record(sample_lines, i, lambda r: r["response"]["body"]["choices"][0][
        "message"].update(content=huge))
    path = tmp_path / "huge.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inter = load_cassette(path).interactions[0]
    assert inter.response["body"]["choices"][0]["message"]["content"] == huge


def test_replay_never_runs_an_env_file_outside_the_project(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """``hermes-replay replay cassettes/`` runs ``header.env_file``: a cassette from a pull
    request must not be able to point it at an arbitrary file on the machine."""
    project = tmp_path / "project"
    (project / "cassettes").mkdir(parents=True)
    monkeypatch.chdir(project)
    evil = tmp_path / "elsewhere" / "evil_env.py"
    evil.parent.mkdir()
    marker = tmp_path / "EXECUTED"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    header = {"type": "header", "schema_version": 1, "env_file": str(evil),
              "command": ["process", "--env.total_steps", "1"]}
    (project / "cassettes" / "c.jsonl").write_text(json.dumps(header) + "\n")
    code = main(["replay", "cassettes/c.jsonl"])
    out = capsys.readouterr()
    assert not marker.exists(), "replay executed an env file from outside the project"
    assert code != 0
    assert str(evil) in out.out + out.err
