"""``serve`` under the harness: LLM traffic replayed, the trajectory API live.

The trainer side is atroposlib's real ``run-api`` on 127.0.0.1 plus a client that registers and
pulls ``/batch`` as a trainer does. The environment runs as ``hermes-replay replay ENV_FILE
--cassette C -- serve …`` in a subprocess with the scripted endpoint already STOPPED: every
``/chat/completions`` is answered from the cassette, while ``/register-env``, ``/info``,
``/status-env`` and ``/scored_data`` pass through to the API untouched (the trainer could not
get a batch otherwise).

Where the cassette comes from, and why the rollout ids line up: it is recorded first, in this
test, from a ``process`` run of the same env. Rollout ids are ``train-<item fingerprint>-
<occurrence>-<slot>``; ``process`` and ``serve`` both draw items with the env's
``get_next_item`` in the same order, and the serve run uses ONE worker and a deep off-policy
queue, so it draws them one after another and never cancels and re-runs a group (a re-run would
take the item's next occurrence — still recorded, since ``process`` cycled the items more
often than serve needs). ``serve --env.total_steps 2`` makes atroposlib's env_manager stop by
itself once the trainer has stepped and the queue holds enough, so the replay ends cleanly and
reports its misses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from _trajectory_api import child_env, pull_batches, stop, trajectory_api

from hermes_replay._cassette import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"
BIN = Path(sys.executable).parent
API_PATHS = ("/register-env", "/scored_data", "/status-env", "/info", "/batch", "/register",
             "/disconnect-env", "/scored_data_list")
RECORDED_GROUPS = 14  # serve uses ~9: it drops groups whose scores are all equal

SERVE_FLAGS = ["--env.total_steps", "2", "--env.group_size", "4", "--env.max_agent_turns", "6",
               # one worker, a deep queue: items drawn one after another, no group cancelled
               "--env.max_num_workers", "1", "--env.max_batches_offpolicy", "10",
               "--env.wandb_name", "multi-signal"]


def _serve_with_trainer(harness: list[str], openai_flags: list[str], tmp_path: Path
                        ) -> tuple[list[list[dict]], str]:
    """``hermes-replay HARNESS… -- serve`` against a fresh run-api; a trainer pulls 2 batches.

    Returns the batches and the harness's output once the env stopped by itself."""
    with trajectory_api(tmp_path) as api_url:
        env_proc = subprocess.Popen(
            [str(BIN / "hermes-replay"), *harness, "--", "serve", *SERVE_FLAGS,
             "--env.rollout_server_url", api_url, *openai_flags],
            env=child_env(), cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            batches = pull_batches(api_url, env_proc, 2, within=120)
            # env_manager stops by itself (total_steps reached); the harness then reports
            output, _ = env_proc.communicate(timeout=90)
            assert env_proc.returncode == 0, output[-5000:]
            status = httpx.get(api_url + "/status").json()
            assert status["current_step"] >= 2
            return batches, output
        finally:
            stop(env_proc)


@pytest.fixture
def recorded(tmp_path, monkeypatch, capsys) -> tuple[Path, Path]:
    """A cassette and the JSONL of a live ``process`` run (the endpoint is gone afterwards)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-serve")
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    cassette, groups = tmp_path / "cassette.jsonl", tmp_path / "process.jsonl"
    try:
        with ScriptedEndpoint(script="examples", seed=3) as endpoint:
            code = main(["record", str(ENV_FILE), "--cassette", str(cassette),
                         "--endpoint", endpoint.base_url, "--model", "scripted",
                         "--server-type", "openai", "--", "process",
                         "--env.total_steps", str(RECORDED_GROUPS), "--env.group_size", "4",
                         "--env.max_agent_turns", "6",
                         "--env.data_path_to_save_groups", str(groups)])
    finally:
        import wandb

        if wandb.run is not None:
            wandb.finish()
    assert code == 0, capsys.readouterr().err[-4000:]
    capsys.readouterr()
    return cassette, groups


def _rollout_key(tokens: list[int], masks: list[int], messages: list[dict]) -> str:
    # rollouts of one group can write the same text (same tokens) with different tool-call ids
    return json.dumps([tokens, masks, messages], sort_keys=True)


def _turns(assistant_messages: list[dict]) -> str:
    """What the model said, turn by turn: content and tool calls (id, name, arguments)."""
    return json.dumps([[m.get("content") or "",
                        [[c["id"], c["function"]["name"], c["function"]["arguments"]]
                         for c in m.get("tool_calls") or []]] for m in assistant_messages])


def _recorded_turns(tape) -> dict[str, str]:
    """Per recorded rollout id: its replies as the cassette holds them."""
    return {rid: _turns([i.response["body"]["choices"][0]["message"] for i in r.interactions])
            for rid, r in tape.rollouts.items()}


def test_serve_replays_llm_traffic_while_the_trajectory_api_passes_through(recorded, tmp_path):
    cassette, process_jsonl = recorded
    tape = load_cassette(cassette)
    urls = [i.request["url"] for i in tape.interactions]
    assert urls and all(u.endswith("/v1/chat/completions") for u in urls)
    # what the recorded run produced, per rollout: its score
    recorded_rollouts: dict[str, float] = {}
    for line in process_jsonl.read_text().splitlines():
        group = json.loads(line)
        for tokens, masks, score, messages in zip(group["tokens"], group["masks"],
                                                  group["scores"], group["messages"],
                                                  strict=True):
            recorded_rollouts[_rollout_key(tokens, masks, messages)] = score
    assert len(tape.outcomes) == RECORDED_GROUPS * 4
    # replies -> recorded rollout ids (several when rollouts answered alike, e.g. no tool call)
    by_turns: dict[str, list[str]] = {}
    for rid, turns in _recorded_turns(tape).items():
        by_turns.setdefault(turns, []).append(rid)

    batches, output = _serve_with_trainer(
        ["replay", str(ENV_FILE), "--cassette", str(cassette)], [], tmp_path)
    assert "0 misses" in output, output[-3000:]
    served: dict[str, float] = {}
    for batch in batches:
        assert sum(len(group["tokens"]) for group in batch) == 8
        for group in batch:
            assert group["env_id"] == 0
            for tokens, masks, score, messages in zip(group["tokens"], group["masks"],
                                                      group["scores"], group["messages"],
                                                      strict=True):
                # the same tokens, masks, messages and score as in the recorded run's JSONL
                key = _rollout_key(tokens, masks, messages)
                assert recorded_rollouts.get(key) == score, "not a rollout of the recorded run"
                # ... and it is one recorded rollout, whose reported reward it carries
                turns = _turns([m for m in messages if m["role"] == "assistant"])
                unserved = [r for r in by_turns.get(turns, []) if r not in served]
                assert unserved, "served replies match no (unserved) recorded rollout"
                rid = unserved[0]
                assert score == pytest.approx(tape.outcomes[rid]["reward"])
                served[rid] = score
    assert len(served) == 16 and len(set(served.values())) > 1
    # nothing of the trajectory API was ever written to the cassette
    text = cassette.read_text()
    assert not any(f'{path}"' in text for path in API_PATHS)
    assert load_cassette(cassette).header.command[0] == "process"  # replay never rewrote it


def test_recording_a_serve_run_writes_only_llm_traffic(tmp_path, monkeypatch):
    """``hermes-replay record -- serve``: the trajectory API is live and passes through; the
    cassette gets the chat completions and not one request to the API."""
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-serve")
    cassette = tmp_path / "serve.jsonl"
    with ScriptedEndpoint(script="examples", seed=3) as endpoint:
        batches, output = _serve_with_trainer(
            ["record", str(ENV_FILE), "--cassette", str(cassette), "--endpoint",
             endpoint.base_url, "--model", "scripted", "--server-type", "openai"], [], tmp_path)
        chat = sum(1 for p, _ in endpoint.requests if p == "/v1/chat/completions")
    assert "rollouts recorded" in output, output[-3000:]
    assert sum(len(g["tokens"]) for b in batches for g in b) == 16
    tape = load_cassette(cassette)
    assert tape.header.command[0] == "serve"
    paths = {i.request["path"] for i in tape.interactions}
    assert paths == {"/v1/chat/completions"}
    assert 0 < len(tape.interactions) <= chat  # cancelled attempts at shutdown are not written
    text = cassette.read_text()
    assert not any(f'{path}"' in text for path in API_PATHS)
    assert "scored_data" not in text and "register-env" not in text
    # every rollout the trainer got was recorded with its reward
    rewards = sorted(o["reward"] for o in tape.outcomes.values())
    served = [s for b in batches for g in b for s in g["scores"]]
    for score in served:
        assert any(abs(score - r) < 1e-9 for r in rewards)
