"""``compact`` and ``merge`` write whole cassettes: never half, never over the source on a
failure, never a traceback on a full disk, and no temp file left behind (issue 25, items 21
and 22)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _limited_writes import limited_code, limited_env

from hermes_replay._cassette import CassetteHeader, Interaction, load_cassette, write_cassette
from hermes_replay._cassette import compact as compact_module
from hermes_replay._errors import CassetteError
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _inter(rollout: str, seq: int) -> Interaction:
    return Interaction(
        rollout=rollout, seq=seq, kind="chat",
        request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                 "headers": {}, "body": {"model": "m", "messages": [
                     {"role": "user", "content": f"{rollout} {seq} " + "shared " * 30}]}},
        response={"status": 200, "headers": {}, "body": {"choices": [
            {"message": {"role": "assistant", "content": "same answer " * 20}}]}})


def _cassette(path: Path, rollouts: list[str]) -> Path:
    header = CassetteHeader(env_name="e", model="m", endpoint_type="openai")
    write_cassette(path, header, [_inter(r, s) for r in rollouts for s in range(2)],
                   {r: {"reward": 0.5} for r in rollouts})
    return path


def _unsorted(path: Path) -> Path:
    """A valid cassette whose rollouts are in reverse name order (as a hand edit, a merge by
    another tool or an old recorder may leave them): the records of each rollout moved as a
    block, blobs kept ahead of their first use."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    head = [line for line, r in zip(lines, records, strict=True) if "rollout" not in r]
    blocks: dict[str, list[str]] = {}
    for line, r in zip(lines, records, strict=True):
        if "rollout" in r:
            blocks.setdefault(r["rollout"], []).append(line)
    body = [line for rid in sorted(blocks, reverse=True) for line in blocks[rid]]
    path.write_text("\n".join(head + body) + "\n", encoding="utf-8")
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_compact_accepts_rollouts_in_any_order(tmp_path, capsys):
    path = _unsorted(_cassette(tmp_path / "c.jsonl", ["b-0", "a-0", "c-0"]))
    before = load_cassette(path)
    assert [r for r in before.rollouts] != sorted(before.rollouts)  # really unsorted
    assert main(["compact", str(path)]) == 0, capsys.readouterr().err
    after = load_cassette(path)
    assert sorted(i.key for i in after.interactions) == sorted(i.key for i in before.interactions)
    assert after.outcomes == before.outcomes


def test_a_compaction_that_does_not_read_back_leaves_the_source(tmp_path, monkeypatch):
    path = _cassette(tmp_path / "c.jsonl", ["a-0", "b-0"])
    original = path.read_bytes()
    real_load = compact_module.load_cassette
    loads = []

    def lossy(p):  # the written file loses an interaction: a bug the check must catch
        c = real_load(p)
        loads.append(p)
        if len(loads) > 1:
            c.interactions.pop()
        return c

    monkeypatch.setattr(compact_module, "load_cassette", lossy)
    with pytest.raises(CassetteError, match="does not read back"):
        compact_module.compact_cassette(path)
    assert path.read_bytes() == original  # in place, yet untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]  # no temp file left


@pytest.mark.parametrize("command", ["merge", "compact"])
def test_a_full_disk_is_an_error_message_not_a_traceback(tmp_path, command):
    shards = [_cassette(tmp_path / f"w{i}.jsonl", [f"r{i}-0"]) for i in range(2)]
    out = tmp_path / "out.jsonl"
    argv = (["merge", *map(str, shards), "-o", str(out)] if command == "merge"
            else ["compact", str(shards[0]), "-o", str(out)])
    # a file size limit fails the write the way a full disk does (an OSError mid-write)
    code = limited_code(600, f"from hermes_replay.cli import main\nsys.exit(main({argv!r}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=limited_env(dict(os.environ)))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot write the" in done.stderr and "errno" in done.stderr
    assert "unchanged" in done.stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("command", ["merge", "compact"])
def test_temp_files_of_a_killed_run_are_removed_by_the_next(tmp_path, capsys, command):
    shards = [_cassette(tmp_path / f"w{i}.jsonl", [f"r{i}-0"]) for i in range(2)]
    out = tmp_path / "out.jsonl"
    stale = tmp_path / f".out.jsonl.{_dead_pid()}.tmp"  # what a SIGKILL mid-write leaves
    stale.write_text('{"schema_version": 1', encoding="utf-8")
    argv = (["merge", *map(str, shards), "-o", str(out)] if command == "merge"
            else ["compact", str(shards[0]), "-o", str(out)])
    assert main(argv) == 0, capsys.readouterr().err
    assert out.is_file() and not stale.exists()
