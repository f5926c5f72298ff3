"""``replay DIR --shard I/N`` and ``hermes-replay results OUT...``: N jobs cover a corpus exactly
once with no coordinator (the split depends only on each cassette's path), Slurm array
variables choose the shard, and the joined table, report and exit code are those of one
replay of the whole corpus — with the cassettes no shard replayed named."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_replay._corpus.shard import (
    Shard,
    ShardError,
    parse_shard,
    shard_from_slurm,
    shard_of,
    take_shard,
)
from hermes_replay.cli import main

_PATHS = st.lists(st.text("abc/-_.0123456789xyz", min_size=1, max_size=30), unique=True,
                  max_size=60)


@settings(max_examples=60, deadline=None)
@given(paths=_PATHS, count=st.integers(1, 9))
def test_the_shards_of_a_split_cover_every_cassette_exactly_once(paths, count) -> None:
    rels = [Path(p) for p in paths]
    taken = [i for k in range(1, count + 1) for i in take_shard(rels, Shard(k, count))]
    assert sorted(taken) == list(range(len(rels)))


def test_a_cassette_keeps_its_shard_when_others_are_added_or_removed() -> None:
    corpus = [Path(f"env-{k}/process.jsonl") for k in range(200)]
    before = {str(rel): shard_of(rel, 8) for rel in corpus}
    grown = [Path("new/one.jsonl"), *corpus[::2], Path("zz/other.jsonl")]
    assert all(shard_of(rel, 8) == before[str(rel)] for rel in grown if str(rel) in before)
    # and the split is balanced enough to be worth having: every shard gets a fair part
    sizes = [len(take_shard(corpus, Shard(k, 8))) for k in range(1, 9)]
    assert min(sizes) >= 10 and sum(sizes) == 200, sizes
    # the same on every runner: the key is the posix path, whatever the OS spells
    assert shard_of("a/b.jsonl", 8) == shard_of(Path("a") / "b.jsonl", 8)


@pytest.mark.parametrize(("text", "shard"), [("1/1", Shard(1, 1)), ("3/8", Shard(3, 8))])
def test_a_shard_is_i_of_n_counting_from_one(text, shard) -> None:
    assert parse_shard(text) == shard


@pytest.mark.parametrize("text", ["0/4", "5/4", "4", "a/b", "1/0", "-1/3"])
def test_a_shard_outside_one_to_n_is_refused_with_an_example(text) -> None:
    with pytest.raises(ShardError, match=r"e\.g\. --shard"):
        parse_shard(text)


@pytest.mark.parametrize(("env", "shard"), [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4"},
     Shard(1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "8", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "8"},
     Shard(8, 8)),
    ({"SLURM_ARRAY_TASK_ID": "14", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_STEP": "2",
      "SLURM_ARRAY_TASK_COUNT": "3"}, Shard(3, 3)),
    ({"SLURM_JOB_ID": "77"}, None),  # a plain (non-array) job: no shard
])
def test_slurm_array_variables_name_the_shard(env, shard) -> None:
    assert shard_from_slurm(env) == shard


def test_a_slurm_task_outside_its_array_is_refused() -> None:
    with pytest.raises(ShardError, match="pass --shard I/N yourself"):
        shard_from_slurm({"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "0",
                          "SLURM_ARRAY_TASK_COUNT": "4"})


# --------------------------------------------------------------------------- end to end


def _corpus(root: Path, count: int) -> Path:
    """``count`` copies of the calc project's recorded cassette under ``cassettes/`` at
    different paths (each a cassette of its own for the split) and one broken file."""
    recorded = root / "cassettes" / "calc_tool_env" / "process.jsonl"
    corpus = root / "corpus"
    for k in range(count):
        (corpus / f"run-{k:02d}").mkdir(parents=True)
        shutil.copy(recorded, corpus / f"run-{k:02d}" / "process.jsonl")
    broken = corpus / "zz_broken" / "process.jsonl"
    broken.parent.mkdir()
    broken.write_text(recorded.read_text().splitlines()[0] + "\n{not json\n")
    return corpus


def _rows(text: str) -> dict[str, str]:
    """cassette -> status, from a final table."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^(\S+\.jsonl)\s.*\s(ok|ERROR|MISS|CHANGED|skip)\s*$", text, re.M)}


@pytest.mark.slow
def test_three_shards_joined_are_one_replay_of_the_corpus(calc_project, capsys,
                                                          monkeypatch) -> None:
    corpus = _corpus(calc_project, 5)
    names = sorted(str(p.relative_to(calc_project)) for p in corpus.rglob("*.jsonl"))
    outs = []
    seen: list[str] = []
    for k in (1, 2, 3):
        out = calc_project / "out" / f"shard-{k}"
        code = main(["replay", "corpus", "--shard", f"{k}/3", "-j", "1", "--no-report",
                     "--out", str(out)])
        text, err = capsys.readouterr()
        rows = _rows(text)
        assert f"shard {k}/3: {len(rows)} of 6 cassettes" in err
        assert code == (1 if "corpus/zz_broken/process.jsonl" in rows else 0)
        seen += rows
        outs.append(out)
    assert sorted(seen) == names  # each cassette in exactly one shard

    code = main(["results", *map(str, outs), "-o", str(calc_project / "joined.html")])
    text, _ = capsys.readouterr()
    rows = _rows(text)
    assert list(rows) == names  # one table, in the corpus' order
    assert rows.pop("corpus/zz_broken/process.jsonl") == "ERROR"
    assert set(rows.values()) == {"ok"}
    assert code == 1  # the broken cassette fails the joined run as it fails its shard
    assert "6 of 6 cassettes replayed, from 3 out folder(s)" in text
    page = (calc_project / "joined.html").read_text()
    for name in names[:-1]:  # every replayed cassette's run is on the one page
        assert str(calc_project / name) in page

    # a shard whose job never ran: its cassettes are named, the run fails
    lost = json.loads((outs[1] / "replay.json").read_text())
    lost_names = [f"{r['rel']}" for r in lost["rows"]]
    assert lost_names, "shard 2/3 of this corpus holds cassettes"
    code = main(["results", str(outs[0]), str(outs[2]), "--no-report"])
    text, _ = capsys.readouterr()
    assert code == 1
    assert "no out folder of shard(s) 2/3" in text
    assert f"{len(lost_names)} cassette(s) replayed by no shard" in text
    for rel in lost_names:
        assert f"  {rel} (shard 2/3)" in text


@pytest.mark.slow
def test_inside_a_slurm_array_the_task_picks_its_shard_and_its_out_folder(
        calc_project, capsys, monkeypatch) -> None:
    corpus = _corpus(calc_project, 3)
    (corpus / "zz_broken" / "process.jsonl").unlink()
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    outs = []
    for task in ("1", "2"):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", task)
        assert main(["replay", "corpus", "-j", "1", "--no-report"]) == 0
        capsys.readouterr()
        outs.append(calc_project / "replay-out" / "slurm-4242" / f"shard-{task}-of-2")
        assert json.loads((outs[-1] / "replay.json").read_text())["shard"] == f"{task}/2"
    assert main(["results", *map(str, outs), "--no-report"]) == 0
    text, _ = capsys.readouterr()
    assert "3 of 3 cassettes replayed, from 2 out folder(s)" in text
    assert "problem" not in text


def test_results_of_a_folder_that_is_no_replay_output_is_a_usage_error(tmp_path,
                                                                        capsys) -> None:
    assert main(["results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: no replay.json here" in err and "next step" in err
