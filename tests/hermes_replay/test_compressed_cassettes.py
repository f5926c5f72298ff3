"""zstd-compressed cassettes (``.jsonl.zst``) are read and written transparently.

What a file is, is decided by its bytes (the zstd magic), what a new file becomes by its name;
the recording journal stays plain JSON Lines. Every command that reads cassettes (ls, show,
diff, verify, check, the folder replay) finds and reads a compressed one like a plain one; a
damaged or oversized compressed file fails naming the file and the next step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
from _core_helpers import TinyServer

import hermes_replay
from hermes_replay import CassetteError, load_cassette
from hermes_replay._cassette import files as _files
from hermes_replay._cassette import partial_path, write_cassette
from hermes_replay._cassette.verify import verify_paths
from hermes_replay._runner.plan import find_cassettes
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"


def _compressed_copy(tmp_path: Path, name: str = "process.jsonl.zst") -> Path:
    src = load_cassette(SHIPPED)
    out = tmp_path / "cassettes" / "terminal_test_env" / name
    write_cassette(out, src.header, src.interactions, src.outcomes, src.tool_calls)
    return out


def test_a_zst_cassette_is_compressed_and_reads_back_the_same(tmp_path: Path) -> None:
    out = _compressed_copy(tmp_path)
    assert out.read_bytes()[:4] == _files.ZSTD_MAGIC
    assert out.stat().st_size < SHIPPED.stat().st_size / 4
    src, again = load_cassette(SHIPPED), load_cassette(out)
    assert again.interactions == src.interactions and again.outcomes == src.outcomes
    assert again.header == src.header and again.tool_calls == src.tool_calls
    # its decompressed bytes are exactly what the plain writer writes
    plain = tmp_path / "plain.jsonl"
    write_cassette(plain, src.header, src.interactions, src.outcomes, src.tool_calls)
    assert _files.read_bytes(out) == plain.read_bytes()


def test_the_bytes_decide_how_a_file_is_read_not_its_name(tmp_path: Path) -> None:
    out = _compressed_copy(tmp_path)
    renamed = tmp_path / "renamed.jsonl"
    shutil.copy(out, renamed)  # compressed, named plain
    plain_named_zst = tmp_path / "plain.jsonl.zst"
    shutil.copy(SHIPPED, plain_named_zst)  # plain, named compressed
    expected = load_cassette(SHIPPED).interactions
    assert load_cassette(renamed).interactions == expected
    assert load_cassette(plain_named_zst).interactions == expected


def test_a_damaged_compressed_cassette_names_the_file_and_the_next_step(tmp_path: Path) -> None:
    out = _compressed_copy(tmp_path)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(out.read_bytes()[: out.stat().st_size // 2])
    with pytest.raises(CassetteError) as info:
        load_cassette(cut)
    assert info.value.path == cut and "zstd" in info.value.reason
    assert "restore it from git" in str(info.value)
    checked, findings = verify_paths([cut])
    assert checked == [cut] and findings and findings[0].kind == "integrity"
    assert main(["ls", str(cut)]) == 1


def test_decompression_stops_at_the_size_limit(tmp_path: Path, monkeypatch) -> None:
    out = _compressed_copy(tmp_path)
    monkeypatch.setattr(_files, "MAX_DECOMPRESSED_BYTES", 10_000)
    with pytest.raises(CassetteError, match="decompresses to more than"):
        load_cassette(out)


def test_every_command_finds_and_reads_a_compressed_cassette(tmp_path: Path, capsys) -> None:
    out = _compressed_copy(tmp_path)
    folder = tmp_path / "cassettes"
    assert find_cassettes(folder) == [out]
    assert main(["ls", str(folder)]) == 0
    listing = capsys.readouterr().out
    assert "process.jsonl.zst" in listing and "12 rollouts · 30 requests" in listing
    rid = sorted(load_cassette(out).rollouts)[0]
    assert main(["show", str(out), "--rollout", rid]) == 0
    assert rid in capsys.readouterr().out
    assert main(["verify", str(folder)]) == 0
    assert "verified 1 cassette(s): 0 finding(s)" in capsys.readouterr().out
    assert main(["diff", str(SHIPPED), str(out)]) == 0
    assert "no differences (12 rollouts" in capsys.readouterr().out


def test_check_finds_compressed_cassettes_by_mode(tmp_path: Path) -> None:
    from hermes_replay._check._runs import cassettes_by_mode, read_header

    out = _compressed_copy(tmp_path)
    assert read_header(out)["env_name"] == "terminal-test"
    assert cassettes_by_mode(out.parent) == {"process": out}


def test_recording_into_a_zst_path_journals_plain_lines_and_commits_compressed(
        tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl.zst"
    with TinyServer() as server:
        with hermes_replay.cassette(path, mode="record"):
            with httpx.Client() as client:
                for n in range(2):
                    with hermes_replay.rollout(f"train-r-0-{n}"):
                        client.post(f"{server.url}/v1/chat/completions",
                                    json={"model": "m", "messages": [{"role": "user",
                                                                      "content": str(n)}]})
                journal = partial_path(path)
                first = journal.read_text(encoding="utf-8").splitlines()
                assert json.loads(first[0])["type"] == "header"  # plain, line by line
                assert len(first) >= 3
        assert not journal.exists()
    assert path.read_bytes()[:4] == _files.ZSTD_MAGIC
    recorded = load_cassette(path)
    assert sorted(recorded.rollouts) == ["train-r-0-0", "train-r-0-1"]
    with hermes_replay.cassette(path, mode="replay", strict=True) as session:
        with httpx.Client() as client:
            for n in range(2):
                with hermes_replay.rollout(f"train-r-0-{n}"):
                    reply = client.post("http://127.0.0.1:9/v1/chat/completions",
                                        json={"model": "m", "messages": [{"role": "user",
                                                                          "content": str(n)}]})
                    assert reply.json()["choices"][0]["message"]["content"].startswith("echo")
    assert session.summary().interactions == 2
