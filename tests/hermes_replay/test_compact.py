"""``hermes-replay compact`` stores every string a cassette holds twice only once.

The interactions and outcomes it reads back are exactly the original's; it shrinks a
recording whose replies recur in the next request; it refuses what it cannot rewrite safely.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay import CassetteError, load_cassette
from hermes_replay._cassette import CassetteHeader, Interaction, partial_path, write_cassette
from hermes_replay._cassette import files as _files
from hermes_replay._cassette.compact import MIN_SHARED_CHARS, compact_cassette
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "cassettes").rglob("*.jsonl"))


def _agent_cassette(path: Path, rollouts: int = 4, turns: int = 4) -> Path:
    """Rollouts whose every reply (300 characters, too short for the default blobs) is
    repeated in the next request, as an agent loop does."""
    inters = []
    for r in range(rollouts):
        messages = [{"role": "user", "content": f"task {r}"}]
        for seq in range(turns):
            reply = f"rollout {r} turn {seq}: " + "I will look at the file first. " * 9
            body = {"model": "m", "messages": list(messages)}
            inters.append(Interaction(
                rollout=f"train-x-{r}-0", seq=seq, kind="chat",
                request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                         "headers": {}, "body": body},
                response={"status": 200, "headers": {}, "body": {"choices": [
                    {"message": {"role": "assistant", "content": reply}}]}}))
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": "go on"}]
    write_cassette(path, CassetteHeader(env_name="e"), inters,
                   {f"train-x-{r}-0": {"reward": 0.5} for r in range(rollouts)})
    return path


def test_compact_stores_a_repeated_reply_once_and_reads_back_the_same(tmp_path: Path) -> None:
    src = _agent_cassette(tmp_path / "a.jsonl")
    before = load_cassette(src)
    plain_text = src.read_text(encoding="utf-8")
    reply = before.interactions[0].response["body"]["choices"][0]["message"]["content"]
    assert MIN_SHARED_CHARS <= len(reply) < 400 and plain_text.count(reply) == 2
    result = compact_cassette(src)
    after = load_cassette(src)
    assert after.interactions == before.interactions and after.outcomes == before.outcomes
    assert src.read_text(encoding="utf-8").count(reply) == 1
    assert result.shared_strings == 12  # every reply but each rollout's last turn recurs
    # each of the 12 saves a copy, less two references and a blob record's framing (~110 bytes)
    assert result.bytes_after <= result.bytes_before - 12 * (len(reply) - 115)


@pytest.mark.parametrize("shipped", SHIPPED, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_every_shipped_cassette_compacts_and_compresses_losslessly(tmp_path: Path,
                                                                   shipped: Path) -> None:
    out = tmp_path / "c.jsonl.zst"
    result = compact_cassette(shipped, out)
    assert out.read_bytes()[:4] == _files.ZSTD_MAGIC and result.bytes_after < result.bytes_before
    original, compacted = load_cassette(shipped), load_cassette(out)
    assert compacted.interactions == original.interactions
    assert compacted.outcomes == original.outcomes and compacted.header == original.header
    assert compacted.tool_calls == original.tool_calls


def test_compact_refuses_a_partial_and_a_folder_and_leaves_them_alone(tmp_path: Path,
                                                                      capsys) -> None:
    src = _agent_cassette(tmp_path / "a.jsonl")
    journal = partial_path(src)
    src.rename(journal)
    before = journal.read_bytes()
    with pytest.raises(CassetteError, match="interrupted recording"):
        compact_cassette(journal)
    assert journal.read_bytes() == before
    assert main(["compact", str(tmp_path)]) == 1
    assert "one cassette file" in capsys.readouterr().err
    assert main(["compact", str(tmp_path / "missing.jsonl")]) == 2


def test_compact_cli_reports_sizes(tmp_path: Path, capsys) -> None:
    src = _agent_cassette(tmp_path / "a.jsonl")
    out = tmp_path / "a.jsonl.zst"
    assert main(["compact", str(src), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert str(out) in text and "12 shared strings stored once" in text
    assert f"{src.stat().st_size:,} -> {out.stat().st_size:,} bytes" in text
    first = _files.read_bytes(out).decode().splitlines()[0]
    assert json.loads(first)["type"] == "header"
