"""Endpoint faults while recording (5xx, timeouts, dropped connections from the scripted
endpoint): retries behave, a failed attempt is never written as a recording, and when the
retries run out the error says what happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from _reliability_helpers import read_records

import hermes_replay
from hermes_replay._cassette import load_cassette, partial_path
from hermes_replay._cassette.verify import verify_file
from hermes_replay.scripted_endpoint import FaultPlan, ScriptedEndpoint

MESSAGES = [{"role": "user", "content": "What is 2+2?"}]


def _ask(base: str, *, retries: int, timeout: float = 10.0, rollout: str = "r0") -> str:
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=retries, timeout=timeout)
    try:
        with hermes_replay.rollout(rollout):
            reply = client.chat.completions.create(model="m", messages=MESSAGES)
        return reply.model_dump_json()
    finally:
        client.close()


def _statuses(path: Path) -> list[int]:
    return [r["response"]["status"] for r in read_records(path) if r["type"] == "interaction"]


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="generic", seed=0, faults=FaultPlan(timeout_s=2.0)) as ep:
        yield ep


@pytest.fixture(autouse=True)
def _fresh(endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch):
    endpoint.reset()
    # the SDK's back-off (0.5 s doubling) would make these tests slow, not better
    monkeypatch.setattr(openai._base_client, "INITIAL_RETRY_DELAY", 0.02)
    yield
    endpoint.reset()


@pytest.mark.parametrize(("kind", "count", "timeout"), [
    ("5xx", 2, 10.0), ("drop", 2, 10.0), ("timeout", 1, 0.4)])
def test_retried_fault_records_only_the_success(endpoint: ScriptedEndpoint, tmp_path: Path,
                                                kind: str, count: int, timeout: float) -> None:
    path = tmp_path / "c.jsonl"
    endpoint.fail_next(count, kind)
    with hermes_replay.cassette(path, "record") as session:
        recorded = _ask(endpoint.base_url, retries=count, timeout=timeout)
    assert endpoint.faults_injected == count
    summary = session.summary()
    assert (summary.recorded, summary.failed_attempts) == (1, count)
    assert _statuses(path) == [200]
    assert [(i.rollout, i.seq) for i in load_cassette(path).interactions] == [("r0", 0)]
    assert verify_file(path) == []
    seen = len(endpoint.requests)
    with hermes_replay.cassette(path, "replay") as replay:
        assert _ask(endpoint.base_url, retries=0) == recorded
    assert replay.summary().misses == []
    assert len(endpoint.requests) == seen  # replay never reached the endpoint


def test_exhausted_retries_raise_a_clear_error_and_write_no_success(
        endpoint: ScriptedEndpoint, tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    endpoint.fail_next(5, "5xx")
    with pytest.raises(openai.InternalServerError) as info:
        with hermes_replay.cassette(path, "record") as session:
            _ask(endpoint.base_url, retries=1)
    assert "scripted fault: injected" in str(info.value)
    assert info.value.status_code in (500, 503)
    assert session.summary().failed_attempts == 2 and session.summary().recorded == 0
    assert not path.exists()  # the block failed: nothing was committed as a cassette
    journal = load_cassette(partial_path(path))
    assert journal.interactions == [] and not journal.complete
    assert "interrupted recording (.partial) with 0 complete" in \
        verify_file(partial_path(path))[0].message


def test_a_swallowed_failure_is_a_miss_on_replay_never_a_fake_success(
        endpoint: ScriptedEndpoint, tmp_path: Path) -> None:
    """Envs catch API errors and score the rollout 0: the cassette then has no recording for
    that request, and replay says so instead of inventing an answer."""
    path = tmp_path / "c.jsonl"
    endpoint.fail_next(2, "drop")
    with hermes_replay.cassette(path, "record") as session:
        with pytest.raises(openai.APIConnectionError):
            _ask(endpoint.base_url, retries=1, rollout="failed")
        _ask(endpoint.base_url, retries=0, rollout="ok")
    assert session.summary().failed_attempts == 2
    assert sorted(load_cassette(path).rollouts) == ["ok"]
    assert _statuses(path) == [200]
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path, "replay"):
            with pytest.raises(hermes_replay.RequestNotRecorded):
                _ask(endpoint.base_url, retries=3, rollout="failed")
    assert "rollout 'failed'" in str(info.value) and "has no rollout" in str(info.value)


def test_random_faults_over_many_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """20 requests with a 30% fault rate (5xx and drops): every request ends recorded once,
    turn numbers stay contiguous, replay matches all of them."""
    monkeypatch.setattr(openai._base_client, "INITIAL_RETRY_DELAY", 0.02)
    path = tmp_path / "c.jsonl"
    plan = FaultPlan(rate=0.3, kinds=("5xx", "drop"), seed=8)
    with ScriptedEndpoint(script="generic", seed=0, faults=plan) as ep:
        with hermes_replay.cassette(path, "record") as session:
            replies = [_ask(ep.base_url, retries=8, rollout=f"r{i % 5}") for i in range(20)]
        injected = ep.faults_injected
        base = ep.base_url
    summary = session.summary()
    print(f"\nrandom faults: 20 requests, {injected} faults injected, "
          f"{summary.failed_attempts} failed attempts not written, {summary.recorded} recorded")
    assert injected >= 5 and summary.failed_attempts == injected
    assert summary.recorded == 20 and set(_statuses(path)) == {200}
    cassette = load_cassette(path)
    for record in cassette.rollouts.values():
        assert [i.seq for i in record.interactions] == list(range(4))
    with hermes_replay.cassette(path, "replay", strict=True):
        assert [_ask(base, retries=0, rollout=f"r{i % 5}") for i in range(20)] == replies


async def test_aiohttp_generate_fault_is_not_recorded(endpoint: ScriptedEndpoint,
                                                      tmp_path: Path) -> None:
    """vLLM/SGLang ``/generate`` goes over aiohttp (atroposlib retries it itself)."""
    path = tmp_path / "c.jsonl"
    endpoint.fail_next(1, "5xx")
    payload: dict[str, Any] = {"text": "Say hi.", "sampling_params": {"max_new_tokens": 8}}
    statuses = []
    async with hermes_replay.cassette(path, "record") as session:
        async with aiohttp.ClientSession() as http:
            with hermes_replay.rollout("g0"):
                for _ in range(2):  # a caller's own retry
                    async with http.post(endpoint.root_url + "/generate", json=payload) as r:
                        statuses.append(r.status)
                        await r.read()
                    if r.status == 200:
                        break
    assert statuses[0] in (500, 503) and statuses[-1] == 200
    assert session.summary().failed_attempts == 1
    assert _statuses(path) == [200]
    assert [(i.rollout, i.seq, i.kind) for i in load_cassette(path).interactions] == \
        [("g0", 0, "generate")]
