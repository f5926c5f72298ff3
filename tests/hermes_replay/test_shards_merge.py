"""Scale-out: several env workers record shards at once; ``hermes-replay merge`` joins them.

The end-to-end test starts three ``hermes-replay record … --shard wN`` processes at the same time
against one scripted endpoint, each a ``process`` run of ``multi_signal_env`` with its own
``--env.split_seed`` (0, 1, 3: their first training items differ, so their rollout ids do — workers
drawing the same item would collide, which the merge refuses; see the unit tests). All three
journals are open at the same moment (no worker waits for another), the merged cassette holds
every rollout, and one strict replay session over all three workers' runs uses every recording
and reproduces each worker's JSONL byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_replay import cassette as open_cassette
from hermes_replay._cassette import CassetteHeader, Interaction, load_cassette, write_cassette
from hermes_replay._cassette.merge import (
    MergeError,
    expand_shards,
    is_merged_shard,
    merge_cassettes,
    shard_path,
)
from hermes_replay._runner.envrun import run_env_file
from hermes_replay._runner.plan import replay_argv
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"
BIN = Path(sys.executable).parent
SEEDS = {"w0": 0, "w1": 1, "w2": 3}


# -- unit: shard paths and merge rules ---------------------------------------------------------

def _inter(rollout: str | None, seq: int, text: str = "hi") -> Interaction:
    return Interaction(
        rollout=rollout, seq=seq, kind="chat",
        request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                 "headers": {}, "body": {"model": "m", "messages": [
                     {"role": "user", "content": f"{rollout} {seq}"}]}},
        response={"status": 200, "headers": {}, "body": {"choices": [
            {"message": {"role": "assistant", "content": text}}]}})


def _shard(path: Path, rollouts: list[str], scopeless: int = 0, **header) -> Path:
    fields = {"env_name": "e", "model": "m", "endpoint_type": "openai",
              "tokenizer": {"name": "t", "fingerprint": "sha256:" + "1" * 64}, **header}
    inters = [_inter(r, s) for r in rollouts for s in range(2)]
    inters += [_inter(None, s, text=f"{path.stem}-{s}") for s in range(scopeless)]
    write_cassette(path, CassetteHeader(**fields), inters,
                   {r: {"reward": float(len(r) % 2)} for r in rollouts})
    return path


def test_shard_path_and_names(tmp_path):
    cassette = tmp_path / "cassettes" / "env" / "process.jsonl"
    assert shard_path(cassette, "w3") == cassette.parent / "process.jsonl.shards" / "w3.jsonl"
    auto = shard_path(cassette, "auto").stem
    assert auto.endswith(f"-{os.getpid()}")
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="bad shard name"):
            shard_path(cassette, bad)


def test_a_folder_replay_skips_shards_once_they_are_merged(tmp_path):
    from hermes_replay._runner.plan import find_cassettes

    cassette = tmp_path / "cassettes" / "env" / "process.jsonl"
    shards = [_shard(shard_path(cassette, n), [f"train-{n}-0-0"]) for n in ("w0", "w1")]
    assert not any(is_merged_shard(s) for s in shards)  # not merged yet: replayed one by one
    merge_cassettes(shards, cassette)
    assert all(is_merged_shard(s) for s in shards) and not is_merged_shard(cassette)
    found = [c for c in find_cassettes(tmp_path / "cassettes") if not is_merged_shard(c)]
    assert found == [cassette]


def test_merge_joins_rollouts_renumbers_scopeless_and_lists_shards(tmp_path):
    a = _shard(tmp_path / "s" / "a.jsonl", ["train-x-0-0", "train-x-0-1"], scopeless=2)
    b = _shard(tmp_path / "s" / "b.jsonl", ["train-y-0-0"], scopeless=1)
    out = tmp_path / "merged.jsonl"
    assert expand_shards([tmp_path / "s"]) == [a, b]
    result = merge_cassettes([a, b], out)
    assert (result.rollouts, result.interactions, result.scopeless) == (3, 9, 3)
    merged = load_cassette(out)
    assert sorted(merged.rollouts) == ["train-x-0-0", "train-x-0-1", "train-y-0-0"]
    assert [i.seq for i in merged.scopeless] == [0, 1, 2]
    assert [i.response["body"]["choices"][0]["message"]["content"]
            for i in merged.scopeless] == ["a-0", "a-1", "b-0"]
    assert merged.outcomes["train-y-0-0"] == {"reward": 1.0}  # len 11: odd
    assert [s["shard"] for s in merged.header.extra["shards"]] == ["a.jsonl", "b.jsonl"]
    assert merged.header.env_name == "e" and merged.header.model == "m"


def test_merge_keeps_every_shards_normalizers_and_names_the_difference(tmp_path, capsys):
    """Issue 36, finding 25: the merged header kept the first shard's normalizers only, so
    the second shard's recordings no longer matched what its own replay matched."""
    a = _shard(tmp_path / "s" / "a.jsonl", ["train-x-0-0"], normalizers=["datetime"])
    b = _shard(tmp_path / "s" / "b.jsonl", ["train-y-0-0"],
               normalizers=["uuid", [r"\bREQ-\d+", "<req>"], "datetime"])
    out = tmp_path / "merged.jsonl"
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 0
    assert load_cassette(out).header.normalizers == [
        "datetime", "uuid", [r"\bREQ-\d+", "<req>"]]
    printed = capsys.readouterr().out
    assert f"note: {a}: keeps 1 of the 3 normalizers the merged cassette keeps" in printed
    assert f"{b}: keeps" not in printed  # it keeps all three (in another order)
    with open_cassette(out, "replay") as session:  # a replay applies all of them
        assert session.normalizers == ["datetime", "uuid", (r"\bREQ-\d+", "<req>")]


def test_merge_refuses_a_rollout_id_in_two_shards(tmp_path):
    a = _shard(tmp_path / "a.jsonl", ["train-x-0-0"])
    b = _shard(tmp_path / "b.jsonl", ["train-x-0-0"])
    with pytest.raises(MergeError) as info:
        merge_cassettes([a, b], tmp_path / "out.jsonl")
    text = str(info.value)
    assert "'train-x-0-0'" in text and "a.jsonl" in text and "b.jsonl" in text
    assert "same item" in text
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("model", "other-model", "model differs"),
    ("env_name", "other-env", "env_name differs"),
    ("tokenizer", {"name": "t", "fingerprint": "sha256:" + "2" * 64}, "tokenizer fingerprint"),
])
def test_merge_refuses_shards_of_different_recordings(tmp_path, field, value, shown):
    a = _shard(tmp_path / "a.jsonl", ["train-x-0-0"])
    b = _shard(tmp_path / "b.jsonl", ["train-y-0-0"], **{field: value})
    code = main(["merge", str(a), str(b), "-o", str(tmp_path / "out.jsonl")])
    assert code == 1 and not (tmp_path / "out.jsonl").exists()
    with pytest.raises(MergeError, match=shown):
        merge_cassettes([a, b], tmp_path / "out.jsonl")


def test_merge_of_an_interrupted_shard_needs_allow_partial(tmp_path, capsys):
    a = _shard(tmp_path / "a.jsonl", ["train-x-0-0"])
    b = _shard(tmp_path / "b.jsonl", ["train-y-0-0"])
    partial = b.with_name("b.jsonl.partial")
    b.rename(partial)
    out = tmp_path / "out.jsonl"
    assert main(["merge", str(a), str(partial), "-o", str(out)]) == 1
    assert "interrupted" in capsys.readouterr().err and not out.exists()
    assert main(["merge", str(a), str(partial), "-o", str(out), "--allow-partial"]) == 0
    assert sorted(load_cassette(out).rollouts) == ["train-x-0-0", "train-y-0-0"]
    assert main(["merge", str(tmp_path / "nope"), "-o", str(out)]) == 2


def test_merge_rebases_the_tokenizer_store_reference(tmp_path):
    cassette = tmp_path / "cassettes" / "env" / "process.jsonl"
    shard = _shard(shard_path(cassette, "w0"), ["train-x-0-0"],
                   tokenizer={"name": "/t", "fingerprint": "sha256:" + "1" * 64,
                              "store": "../../.tokenizers/" + "1" * 64})
    merge_cassettes([shard], cassette)
    assert load_cassette(cassette).header.tokenizer["store"] == "../.tokenizers/" + "1" * 64


# -- end to end: three workers at once ----------------------------------------------------------

def _worker_flags(seed: int, out: Path) -> list[str]:
    return ["process", "--env.total_steps", "1", "--env.group_size", "2",
            "--env.max_agent_turns", "4", "--env.split_seed", str(seed),
            "--env.data_path_to_save_groups", str(out)]


@pytest.mark.slow
def test_three_workers_record_shards_at_once_and_the_merge_replays(tmp_path, monkeypatch,
                                                                     capsys):
    cassette = tmp_path / "cassettes" / "multi_signal_env" / "process.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "HERMES_BASE_URL"}
    env.update({"HERMES_API_KEY": "sk-test-shards", "WANDB_MODE": "disabled",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    with ScriptedEndpoint(script="examples", seed=0, latency=(0.05, 0.1)) as endpoint:
        procs = {
            name: subprocess.Popen(
                [str(BIN / "hermes-replay"), "record", str(ENV_FILE), "--cassette",
                 str(cassette), "--shard", name, "--endpoint", endpoint.base_url, "--model",
                 "scripted", "--server-type", "openai", "--",
                 *_worker_flags(seed, tmp_path / f"{name}.jsonl")],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True)
            for name, seed in SEEDS.items()}
        journals = [shard_path(cassette, n).with_suffix(".jsonl.partial") for n in SEEDS]
        most_open = 0
        deadline = time.monotonic() + 120
        while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
            most_open = max(most_open, sum(j.exists() for j in journals))
            time.sleep(0.02)
        outputs = {n: p.communicate(timeout=30)[0] for n, p in procs.items()}
    for name, proc in procs.items():
        assert proc.returncode == 0, outputs[name][-4000:]
        assert "hermes-replay merge" in outputs[name]  # the next step it prints
    assert most_open == 3, "the workers did not record at the same time"
    shards_dir = cassette.with_name("process.jsonl.shards")
    assert sorted(p.name for p in shards_dir.iterdir()) == ["w0.jsonl", "w1.jsonl", "w2.jsonl"]
    assert not cassette.exists()

    assert main(["merge", str(shards_dir), "-o", str(cassette)]) == 0
    assert "3 shards · 6 rollouts" in capsys.readouterr().out
    merged = load_cassette(cassette)
    assert len(merged.rollouts) == 6 and len(merged.outcomes) == 6
    assert len({rid.split("-")[1] for rid in merged.rollouts}) == 3  # three items, one each

    # one strict replay session over all three workers' runs: every recording is used
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    try:
        with open_cassette(cassette, mode="replay", strict=True) as session:
            for name, seed in SEEDS.items():
                argv = replay_argv(merged.header.command,
                                   _worker_flags(seed, tmp_path / f"replayed-{name}.jsonl"))
                assert run_env_file(ENV_FILE, argv) == 0
    finally:
        import wandb

        if wandb.run is not None:
            wandb.finish()
    summary = session.summary()
    assert not summary.misses and not summary.unused and summary.rollouts == 6
    for name in SEEDS:
        recorded = (tmp_path / f"{name}.jsonl").read_bytes()
        assert recorded and recorded == (tmp_path / f"replayed-{name}.jsonl").read_bytes()
        assert json.loads(recorded.splitlines()[0])["scores"]
