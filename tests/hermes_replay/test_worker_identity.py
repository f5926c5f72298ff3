"""Worker identity: N workers of one configuration record rollouts that never collide.

The environment layer puts the worker in its rollout ids (``…@w1``; ``w0`` keeps the plain
id); the identity is given (``--worker`` / ``HERMES_REPLAY_WORKER``) or derived from the order
``serve`` workers registered (``tests/hermes_replay/test_deployment.py`` runs that end to end).
A session told its worker leaves other workers' recordings to them, and a ``--shard auto``
recording is named after its worker once the identity is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from _core_helpers import TinyServer

import hermes_replay
from environments._ids import (
    rollout_id_for,
    worker_from_environment,
    worker_from_registration,
)
from hermes_replay._cassette import load_cassette
from hermes_replay._cassette.merge import merge_cassettes, shard_path
from hermes_replay._session.workers import owner
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"
ITEM = {"id": 7, "question": "2+2?"}


def test_the_worker_is_part_of_the_rollout_id_and_w0_keeps_the_plain_one() -> None:
    plain = rollout_id_for(ITEM, 0, 1)
    assert rollout_id_for(ITEM, 0, 1, worker="w0") == plain
    assert rollout_id_for(ITEM, 0, 1, worker="w2") == plain + "@w2"
    assert owner(plain) == "w0" and owner(plain + "@w2") == "w2"
    assert rollout_id_for(ITEM, 0, 1, worker="gpu-node-3") == plain + "@gpu-node-3"


def test_identity_from_the_variable_or_the_registration_order(monkeypatch) -> None:
    monkeypatch.delenv("HERMES_REPLAY_WORKER", raising=False)
    assert worker_from_environment() is None
    monkeypatch.setenv("HERMES_REPLAY_WORKER", "w5")
    assert worker_from_environment() == "w5"
    monkeypatch.setenv("HERMES_REPLAY_WORKER", "../etc")
    with pytest.raises(ValueError, match="no worker name"):
        worker_from_environment()
    # atroposlib's /register-env answers "<desired name>_<k>" for the k-th same-named worker
    assert worker_from_registration("multi-signal_0", "multi-signal") == "w0"
    assert worker_from_registration("multi-signal_12", "multi-signal") == "w12"
    assert worker_from_registration("other_1", "multi-signal") is None
    assert worker_from_registration(None, "multi-signal") is None


def _record(path: Path, server: TinyServer, rollouts: list[str],
            **options) -> hermes_replay.Session:
    with hermes_replay.cassette(path, mode="record", **options) as session:
        hermes_replay.annotate(worker=options.get("worker") or "w1")
        with httpx.Client() as client:
            for rid in rollouts:
                with hermes_replay.rollout(rid) as scope:
                    client.post(f"{server.url}/v1/chat/completions",
                                json={"model": "m", "messages": [{"role": "user",
                                                                  "content": rid}]})
                    scope.report(reward=1.0)
    return session


def test_a_shard_auto_recording_is_named_after_its_worker(tmp_path: Path) -> None:
    provisional = shard_path(tmp_path / "c.jsonl", "host-123")
    with TinyServer() as server:
        session = _record(provisional, server, ["train-a-0-0@w1"], shard_by_worker=True)
    final = provisional.with_name("w1.jsonl")
    assert session.path == final and final.is_file()
    assert not provisional.exists() and not provisional.with_name("host-123.jsonl.partial").exists()
    recorded = load_cassette(final)
    assert recorded.header.extra["worker"] == "w1"
    assert list(recorded.rollouts) == ["train-a-0-0@w1"]


def test_a_workers_replay_leaves_the_other_workers_recordings_to_them(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    with TinyServer() as server:
        for worker, suffix in (("w0", ""), ("w1", "@w1")):
            _record(shard_path(cassette, worker), server,
                    [f"train-a-0-0{suffix}", f"train-b-0-0{suffix}"], worker=worker)
    merge_cassettes([cassette.with_name("c.jsonl.shards")], cassette)
    assert sorted(load_cassette(cassette).rollouts) == [
        "train-a-0-0", "train-a-0-0@w1", "train-b-0-0", "train-b-0-0@w1"]

    def replay(worker: str | None, rollouts: list[str]) -> hermes_replay.ReplaySummary:
        with hermes_replay.cassette(cassette, mode="replay", strict=True) as session:
            if worker:
                hermes_replay.annotate(worker=worker)
            with httpx.Client() as client:
                for rid in rollouts:
                    with hermes_replay.rollout(rid):
                        client.post("http://127.0.0.1:9/v1/chat/completions",
                                    json={"model": "m", "messages": [{"role": "user",
                                                                      "content": rid}]})
        return session.summary()

    one = replay("w1", ["train-a-0-0@w1", "train-b-0-0@w1"])
    assert (one.unused, one.other_workers, one.worker) == ([], 2, "w1")
    # a run that is no worker of a deployment replays everything, or is told what it skipped
    with pytest.raises(hermes_replay.UnusedRecordings) as info:
        replay(None, ["train-a-0-0", "train-b-0-0"])
    assert sorted(r for r, _ in info.value.unused) == ["train-a-0-0@w1", "train-b-0-0@w1"]
    # worker w0 still must use all of its own
    with pytest.raises(hermes_replay.UnusedRecordings) as info:
        replay("w0", ["train-a-0-0"])
    assert [r for r, _ in info.value.unused] == ["train-b-0-0"]


@pytest.mark.slow
def test_two_workers_of_one_configuration_record_merge_and_replay_by_flag(
        tmp_path: Path, monkeypatch, capsys) -> None:
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-workers")
    monkeypatch.delenv("HERMES_REPLAY_WORKER", raising=False)
    cassette = tmp_path / "process.jsonl"
    flags = ["process", "--env.total_steps", "1", "--env.group_size", "2",
             "--env.max_agent_turns", "3"]
    with ScriptedEndpoint(script="examples", seed=1) as endpoint:
        for worker in ("w0", "w1"):
            code = main(["record", str(ENV_FILE), "--cassette", str(cassette), "--worker",
                         worker, "--endpoint", endpoint.base_url, "--model", "scripted",
                         "--server-type", "openai", "--", *flags,
                         "--env.data_path_to_save_groups", str(tmp_path / f"{worker}.jsonl")])
            assert code == 0, capsys.readouterr().err[-3000:]
    shards = cassette.with_name("process.jsonl.shards")
    assert sorted(p.name for p in shards.iterdir()) == ["w0.jsonl", "w1.jsonl"]
    assert main(["merge", str(shards), "-o", str(cassette)]) == 0
    ids = sorted(load_cassette(cassette).rollouts)
    # the same item and slots in both workers, told apart by the worker suffix alone
    assert len(ids) == 4 and len({i.split("@")[0] for i in ids}) == 2
    assert sum(i.endswith("@w1") for i in ids) == 2
    capsys.readouterr()
    for worker in ("w0", "w1"):
        out = tmp_path / f"replayed-{worker}.jsonl"
        code = main(["replay", str(ENV_FILE), "--cassette", str(cassette), "--worker", worker,
                     "--strict", "--", *flags, "--env.data_path_to_save_groups", str(out)])
        text = capsys.readouterr().out
        assert code == 0 and "2 rollouts replayed" in text and "0 misses" in text, text
        recorded = [json.loads(line) for line in (tmp_path / f"{worker}.jsonl").open()]
        assert [json.loads(line) for line in out.open()] == recorded


def test_two_workers_with_one_identity_fail_instead_of_replacing_a_shard(tmp_path: Path) -> None:
    """Identities must be unique; when two recorders come up with the same one, the second
    fails as it learns it (naming the cause) and the first one's shard is the one written."""
    first = hermes_replay.cassette(shard_path(tmp_path / "c.jsonl", "host-1"), mode="record",
                                   shard_by_worker=True)
    second = hermes_replay.cassette(shard_path(tmp_path / "c.jsonl", "host-2"), mode="record",
                                    shard_by_worker=True)
    final = shard_path(tmp_path / "c.jsonl", "w1")
    final.parent.mkdir(parents=True)
    final.with_name("w1.jsonl.partial").write_text("")  # a dead recorder's journal of w1
    first.start()
    try:
        first.annotate({"worker": "w1", "note": "first"})
        second.start()
        second.annotate({"worker": "w1", "note": "second"})
        assert second.path != final  # it never took the name
        with pytest.raises(hermes_replay.CassetteError, match="two workers with one identity"):
            second.stop()
    finally:
        first.stop()
    assert load_cassette(final).header.extra["note"] == "first"
    assert not final.with_name("w1.jsonl.partial").exists()  # the claim went with the commit
    assert final.with_name("host-2.jsonl.partial").exists()  # the loser's journal is kept
