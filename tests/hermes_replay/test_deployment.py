"""A real Atropos deployment, recorded and replayed: ``run-api``, a trainer, three env workers.

The trainer side is atroposlib's own ``run-api`` on 127.0.0.1 and a client that registers and
pulls ``/batch`` as a trainer does. Three environment workers run ``serve`` as separate
processes with ONE configuration — so they draw the same items, and their rollout ids would
collide without a worker identity. Each gets one, derived from the order it registered with
the API (``w0``, ``w1``, ``w2``), in its rollout ids and in its shard's name.

1. Recording: the workers run under ``hermes-replay record --shard auto`` against the scripted
   endpoint; each writes ``<cassette>.shards/w<k>.jsonl``; ``merge`` joins them.
2. Replay: the endpoint is stopped; a fresh ``run-api`` and trainer; the same three workers run
   under ``hermes-replay replay --cassette <merged>``.

What must hold: the merged cassette holds every worker's rollouts (the same items three times,
told apart only by the worker suffix — no collision); in replay every worker serves its own
rollouts with no miss and no unused recording; and the trainer receives exactly the batches —
tokens, masks, messages, scores — it received from the live deployment, every score the reward
the cassette recorded.

Why it ends by itself, with nothing half-recorded: each worker draws exactly ``ITEMS`` items
(``deployment/bounded_env.py``), one batch is one group, no group is dropped for equal scores,
and ``--env.total_steps`` is one less than the number of groups, so atroposlib's serve loop
stops only once every group of every worker has reached the API (see its env_manager).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from _trajectory_api import child_env as _child_env
from _trajectory_api import free_port as _free_port
from _trajectory_api import stop as _stop
from _trajectory_api import wait_http as _wait_http

from hermes_replay._cassette import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ENV_FILE = HERE / "deployment" / "bounded_env.py"
BIN = Path(sys.executable).parent
WORKERS, ITEMS, GROUP = 3, 2, 2
STEPS = WORKERS * ITEMS  # one batch = one group
SERVE_FLAGS = ["--env.items_per_worker", str(ITEMS), "--env.group_size", str(GROUP),
               "--env.max_agent_turns", "4", "--env.max_num_workers", "2",
               "--env.max_batches_offpolicy", "100", "--env.ensure_scores_are_not_same", "false",
               "--env.total_steps", str(STEPS - 1), "--env.wandb_name", "bounded"]


def _deployment(harness: list[str], tmp_path: Path) -> tuple[list[dict], list[str]]:
    """run-api, a trainer and WORKERS ``hermes-replay HARNESS… -- serve`` processes; returns
    the groups of every batch the trainer received and each worker's output."""
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}"
    api = subprocess.Popen([str(BIN / "run-api"), "--host", "127.0.0.1", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[subprocess.Popen] = []
    try:
        _wait_http(api_url + "/", time.monotonic() + 30)
        httpx.post(api_url + "/register", json={
            "wandb_group": "test", "wandb_project": "test", "batch_size": GROUP,
            "max_token_len": 16384, "checkpoint_dir": str(tmp_path / "ckpt"),
            "save_checkpoint_interval": -1, "starting_step": 0, "num_steps": STEPS}
        ).raise_for_status()
        assert httpx.get(api_url + "/batch").json()["batch"] is None  # starts the run
        for _ in range(WORKERS):
            workers.append(subprocess.Popen(
                [str(BIN / "hermes-replay"), *harness, "--", "serve", *SERVE_FLAGS,
                 "--env.rollout_server_url", api_url],
                env=_child_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        groups: list[dict] = []
        batches = 0
        deadline = time.monotonic() + 240
        while batches < STEPS and time.monotonic() < deadline:
            batch = httpx.get(api_url + "/batch", timeout=10).json()["batch"]
            if batch:
                batches += 1
                groups.extend(batch)
            else:
                for w in workers:
                    assert w.poll() is None, w.communicate()[0][-5000:]
                time.sleep(0.3)
        assert batches == STEPS, f"the trainer got {batches} of {STEPS} batches in time"
        outputs = [w.communicate(timeout=120)[0] for w in workers]
        for w, out in zip(workers, outputs, strict=True):
            assert w.returncode == 0, out[-5000:]
        return groups, outputs
    finally:
        for w in workers:
            _stop(w)
        _stop(api)


def _rollouts(groups: list[dict]) -> Counter[str]:
    """Every rollout the trainer got: tokens, masks, messages and score (one key each)."""
    out: Counter[str] = Counter()
    for group in groups:
        assert len(group["tokens"]) == GROUP
        for tokens, masks, score, messages in zip(group["tokens"], group["masks"],
                                                  group["scores"], group["messages"],
                                                  strict=True):
            out[json.dumps([tokens, masks, messages, score], sort_keys=True)] += 1
    return out


def test_a_recorded_three_worker_deployment_replays_with_the_endpoint_stopped(
        tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-deployment")
    cassette = tmp_path / "cassettes" / "bounded" / "serve.jsonl"
    with ScriptedEndpoint(script="examples", seed=5) as endpoint:
        live_groups, live_out = _deployment(
            ["record", str(ENV_FILE), "--cassette", str(cassette), "--shard", "auto",
             "--endpoint", endpoint.base_url, "--model", "scripted", "--server-type", "openai"],
            tmp_path)
    # each worker named its shard after the identity the API's registration order gave it
    shards = cassette.with_name("serve.jsonl.shards")
    assert sorted(p.name for p in shards.iterdir()) == ["w0.jsonl", "w1.jsonl", "w2.jsonl"]
    for out in live_out:
        assert "hermes-replay merge" in out, out[-3000:]

    assert main(["merge", str(shards), "-o", str(cassette)]) == 0
    capsys.readouterr()
    merged = load_cassette(cassette)
    ids = sorted(merged.rollouts)
    assert len(ids) == WORKERS * ITEMS * GROUP and len(merged.outcomes) == len(ids)
    # the same items and slots in every worker: only the worker suffix tells them apart
    bases = Counter(rid.split("@")[0] for rid in ids)
    assert len(bases) == ITEMS * GROUP and set(bases.values()) == {WORKERS}
    assert Counter(rid.partition("@")[2] or "w0" for rid in ids) == {
        "w0": ITEMS * GROUP, "w1": ITEMS * GROUP, "w2": ITEMS * GROUP}
    live = _rollouts(live_groups)
    assert sum(live.values()) == len(ids)
    assert sorted(json.loads(k)[3] for k in live.elements()) == sorted(
        o["reward"] for o in merged.outcomes.values())

    # the endpoint is gone: the same deployment, replayed from the merged cassette
    replay_groups, replay_out = _deployment(
        ["replay", str(ENV_FILE), "--cassette", str(cassette), "--strict"], tmp_path)
    for out in replay_out:
        assert f"{ITEMS * GROUP} rollouts replayed" in out, out[-3000:]
        assert "0 misses · 0 unused recordings" in out, out[-3000:]
        assert "left to other workers" in out, out[-3000:]  # the others' rollouts: not its own
    assert _rollouts(replay_groups) == live  # what the trainer got, rollout for rollout
