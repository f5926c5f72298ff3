"""The openai SDK (3.x, on httpx2): record against the scripted endpoint, replay with it stopped."""

from __future__ import annotations

from pathlib import Path

import httpx2
import openai
import pytest
from _core_helpers import lines_of

import hermes_replay
from hermes_replay._session import intercept as _intercept
from hermes_replay.scripted_endpoint import ScriptedEndpoint

MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 2+2?"}]


def _record(path: Path, fn, seed: int = 0):
    with ScriptedEndpoint(script="generic", seed=seed) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record") as session:
            recorded = fn(base)
    assert session.summary().recorded > 0
    return base, recorded


async def test_async_openai_round_trip_with_endpoint_stopped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    async def run(base: str) -> list[str]:
        client = openai.AsyncOpenAI(base_url=base, api_key="sk-test-key-not-real-000000",
                                    max_retries=0)
        out = []
        for i in range(3):
            with hermes_replay.rollout(f"r{i}"):
                resp = await client.chat.completions.create(model="m", messages=MESSAGES,
                                                            temperature=1.0)
                out.append(resp.model_dump_json())
        return out

    with ScriptedEndpoint(script="generic", seed=1) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(base)
    # the endpoint is gone: anything that leaked to the network would fail to connect
    async with hermes_replay.cassette(path, "replay") as session:
        replayed = await run(base)
    assert replayed == recorded
    assert len(set(recorded)) == 3  # the endpoint sampled differently per rollout
    summary = session.summary()
    assert (summary.interactions, summary.rollouts, summary.misses) == (3, 3, [])


def test_sync_openai_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def run(base: str) -> list[str]:
        client = openai.OpenAI(base_url=base, api_key="sk-test-key-not-real-000000",
                               max_retries=0)
        with hermes_replay.rollout("only"):
            first = client.chat.completions.create(model="m", messages=MESSAGES)
            second = client.chat.completions.create(
                model="m", messages=[*MESSAGES, first.choices[0].message.model_dump(
                    exclude_none=True), {"role": "user", "content": "And 3+3?"}])
        return [first.model_dump_json(), second.model_dump_json()]

    base, recorded = _record(path, run)
    with hermes_replay.cassette(path, "replay"):
        assert run(base) == recorded
    records = lines_of(path)
    assert [r["seq"] for r in records if r["type"] == "interaction"] == [0, 1]


def test_streaming_is_recorded_as_chunks_and_replayed_as_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def run(base: str) -> list[list[str]]:
        client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
        with hermes_replay.rollout("s"):
            stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            return [[c.choices[0].delta.content or "" for c in stream if c.choices]]

    base, recorded = _record(path, run)
    assert len(recorded[0]) > 2  # really several deltas
    with hermes_replay.cassette(path, "replay"):
        assert run(base) == recorded
    (inter,) = [r for r in lines_of(path) if r["type"] == "interaction"]
    chunks = inter["response"]["chunks"]
    assert chunks[-1] == "data: [DONE]\n\n" and all(c.startswith("data: ") for c in chunks)
    assert inter["response"]["headers"]["content-type"].startswith("text/event-stream")


async def test_async_streaming_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    async def run(base: str) -> str:
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
        with hermes_replay.rollout("s"):
            stream = await client.chat.completions.create(model="m", messages=MESSAGES,
                                                          stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream
                            if c.choices])

    with ScriptedEndpoint(script="generic", seed=2) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(base)
    async with hermes_replay.cassette(path, "replay"):
        assert await run(base) == recorded
    assert recorded


def test_patched_only_inside_the_block(tmp_path: Path) -> None:
    original = httpx2.AsyncHTTPTransport.handle_async_request
    assert _intercept.installed() == ()
    with ScriptedEndpoint(script="generic") as ep:
        with hermes_replay.cassette(tmp_path / "c.jsonl", "record"):
            assert set(_intercept.installed()) == {"httpx", "httpx2", "aiohttp"}
            assert httpx2.AsyncHTTPTransport.handle_async_request is not original
            with hermes_replay.cassette(tmp_path / "inner.jsonl", "passthrough"):
                pass  # nested: leaving the inner block keeps the outer one's patches
            assert httpx2.AsyncHTTPTransport.handle_async_request is not original
            openai.OpenAI(base_url=ep.base_url, api_key="x").chat.completions.create(
                model="m", messages=MESSAGES)
    assert httpx2.AsyncHTTPTransport.handle_async_request is original
    assert _intercept.installed() == ()
    assert (tmp_path / "c.jsonl").exists() and not (tmp_path / "inner.jsonl").exists()


def test_a_miss_ends_the_sdk_request_at_once_without_retries(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    base, _ = _record(path, lambda base: openai.OpenAI(base_url=base, api_key="x")
                      .chat.completions.create(model="m", messages=MESSAGES))
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=5)
    events: list[hermes_replay.ReplayEvent] = []
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path, "replay", on_event=events.append) as session:
            with pytest.raises(hermes_replay.RequestNotRecorded) as signal:
                client.chat.completions.create(model="other-model", messages=MESSAGES)
    assert "outside any rollout, turn 1: POST /v1/chat/completions has no recording" in str(
        signal.value)
    text = str(info.value)
    assert 'body.model: "m"' in text and 'body.model: "other-model"' in text
    assert [e.kind for e in events] == ["loaded", "miss"]  # the SDK's 5 retries never happened
    assert len(session.misses) == 1
