"""A ``<cassette>.shards/`` folder reads as the one cassette its shards merge into.

``load_cassette``, ``ls``, ``show``, ``diff``, ``verify`` and ``check`` take the folder the
workers recorded into as they take a cassette — plain or zstd shards alike — without a merge
written first; shards that could not be merged (a rollout id twice) are a finding, not a view.
"""

from __future__ import annotations

from pathlib import Path

from test_shards_merge import _shard

from hermes_replay import load_cassette
from hermes_replay._cassette import write_cassette
from hermes_replay._cassette.merge import merge_cassettes, shard_path
from hermes_replay._cassette.verify import verify_paths
from hermes_replay.cli import main


def _shards(tmp_path: Path, compressed: bool = False) -> tuple[Path, Path]:
    cassette = tmp_path / "cassettes" / "env" / ("process.jsonl" + (".zst" if compressed else ""))
    _shard(shard_path(cassette, "w0"), ["train-w0-a-0-0", "train-w0-a-0-1"], scopeless=1)
    _shard(shard_path(cassette, "w1"), ["train-w1-a-0-0"])
    return cassette, cassette.with_name(cassette.name + ".shards")


def test_shard_paths_of_a_compressed_cassette_are_compressed(tmp_path: Path) -> None:
    _, folder = _shards(tmp_path, compressed=True)
    assert sorted(p.name for p in folder.iterdir()) == ["w0.jsonl.zst", "w1.jsonl.zst"]
    assert all(p.read_bytes()[:4] == b"\x28\xb5\x2f\xfd" for p in folder.iterdir())


def test_a_shards_folder_loads_as_its_merge(tmp_path: Path) -> None:
    for compressed in (False, True):
        cassette, folder = _shards(tmp_path / str(compressed), compressed)
        view = load_cassette(folder)
        merge_cassettes([folder], cassette)
        merged = load_cassette(cassette)
        assert sorted(view.rollouts) == ["train-w0-a-0-0", "train-w0-a-0-1", "train-w1-a-0-0"]
        assert view.interactions == merged.interactions and view.outcomes == merged.outcomes
        assert view.complete and view.path == folder


def test_ls_show_diff_verify_take_a_shards_folder(tmp_path: Path, capsys) -> None:
    cassette, folder = _shards(tmp_path, compressed=True)
    assert main(["show", str(folder), "--rollout", "train-w1"]) == 0
    assert "train-w1-a-0-0" in capsys.readouterr().out
    assert main(["ls", str(folder)]) == 0
    listing = capsys.readouterr().out
    assert "w0.jsonl.zst" in listing and "w1.jsonl.zst" in listing
    assert main(["verify", str(folder)]) == 0
    assert "verified 2 cassette(s): 0 finding(s)" in capsys.readouterr().out
    merge_cassettes([folder], cassette)
    assert load_cassette(folder).header.tokenizer == load_cassette(cassette).header.tokenizer
    assert main(["diff", str(cassette), str(folder)]) == 0
    assert "no differences (3 rollouts" in capsys.readouterr().out


def test_verify_reports_shards_that_cannot_merge(tmp_path: Path, capsys) -> None:
    cassette = tmp_path / "process.jsonl"
    _shard(shard_path(cassette, "w0"), ["train-a-0-0"])
    _shard(shard_path(cassette, "w1"), ["train-a-0-0"])  # same id: two workers, one identity
    folder = cassette.with_name("process.jsonl.shards")
    _, findings = verify_paths([folder])
    assert len(findings) == 1 and findings[0].kind == "integrity"
    assert "'train-a-0-0' was recorded in two shards" in findings[0].message
    assert "identity" in findings[0].hint
    assert main(["verify", str(folder)]) == 1
    assert main(["show", str(folder)]) == 2
    assert "two shards" in capsys.readouterr().err


def test_check_takes_a_shards_folder_as_the_cassette_of_its_mode(tmp_path: Path) -> None:
    from hermes_replay._check._runs import cassettes_by_mode, read_header

    _, folder = _shards(tmp_path)
    for shard in folder.iterdir():  # a recorded command says which mode it is
        c = load_cassette(shard)
        c.header.command = ["process", "--env.total_steps", "1"]
        write_cassette(shard, c.header, c.interactions, c.outcomes, c.tool_calls)
    assert read_header(folder)["command"][0] == "process"
    assert cassettes_by_mode(folder) == {"process": folder}
