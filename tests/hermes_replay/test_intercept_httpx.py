"""Plain httpx (sync and async): LLM paths recorded and replayed, everything else untouched."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from _core_helpers import TinyServer, lines_of

import hermes_replay
from hermes_replay.scripted_endpoint import ScriptedEndpoint

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "temperature": 1.0}


def test_sync_httpx_round_trip_with_endpoint_stopped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=5) as ep:
        url = ep.base_url + "/chat/completions"
        with hermes_replay.cassette(path, "record"), httpx.Client() as client:
            with hermes_replay.rollout("a"):
                recorded = [client.post(url, json=BODY).content for _ in range(2)]
    with hermes_replay.cassette(path, "replay"), httpx.Client() as client:
        with hermes_replay.rollout("a"):
            replayed = [client.post(url, json=BODY) for _ in range(2)]
    assert [r.json() for r in replayed] == [httpx.Response(200, content=c).json()
                                           for c in recorded]
    assert recorded[0] != recorded[1]  # two samples of the same request, each in its turn
    assert replayed[0].status_code == 200
    assert replayed[0].headers["content-type"].startswith("application/json")


async def test_async_httpx_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=6) as ep:
        url = ep.base_url + "/chat/completions"
        async with hermes_replay.cassette(path, "record"), httpx.AsyncClient() as client:
            with hermes_replay.rollout("a"):
                recorded = (await client.post(url, json=BODY)).json()
    async with hermes_replay.cassette(path, "replay"), httpx.AsyncClient() as client:
        with hermes_replay.rollout("a"):
            assert (await client.post(url, json=BODY)).json() == recorded


async def test_async_httpx_streaming_passes_through_while_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    body = {**BODY, "stream": True}
    with ScriptedEndpoint(script="generic", seed=7) as ep:
        url = ep.base_url + "/chat/completions"
        async with hermes_replay.cassette(path, "record"), httpx.AsyncClient() as client:
            async with client.stream("POST", url, json=body) as resp:
                recorded = [line async for line in resp.aiter_lines()]
    async with hermes_replay.cassette(path, "replay"), httpx.AsyncClient() as client:
        async with client.stream("POST", url, json=body) as resp:
            assert [line async for line in resp.aiter_lines()] == recorded
    assert "data: [DONE]" in recorded


def test_non_llm_traffic_passes_through_and_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with TinyServer() as server:
        with hermes_replay.cassette(path, "record"), httpx.Client() as client:
            assert client.post(server.url + "/register-env", json={"x": 1}).json()["ok"]
            assert client.get(server.url + "/info").json()["ok"]
            assert client.post(server.url + "/scored_data", json={"tokens": [1]}).json()["ok"]
        # replay does not block non-LLM traffic either: it goes live, untouched
        with hermes_replay.cassette(path, "replay"), httpx.Client() as client:
            assert client.get(server.url + "/status-env").json()["ok"]
    assert [r["type"] for r in lines_of(path)] == ["header"]
    assert [p for _, p, _ in server.requests] == ["/register-env", "/info", "/scored_data",
                                                  "/status-env"]


def test_replay_never_reaches_the_network_for_llm_paths(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with TinyServer() as server:
        url = server.url + "/v1/chat/completions"
        with hermes_replay.cassette(path, "record"), httpx.Client() as client:
            client.post(url, json=BODY)
        before = len(server.requests)
        with hermes_replay.cassette(path, "replay"), httpx.Client() as client:
            assert client.post(url, json=BODY).json()["choices"][0]["message"]["content"]
            with pytest.raises(hermes_replay.CassetteMiss):
                with hermes_replay.cassette(path, "replay"):
                    client.post(url, json={**BODY, "model": "x"})
        assert len(server.requests) == before


def test_custom_transports_are_left_alone(tmp_path: Path) -> None:
    seen = []
    transport = httpx.MockTransport(lambda request: seen.append(request) or httpx.Response(
        200, json={"mocked": True}))
    with hermes_replay.cassette(tmp_path / "c.jsonl", "record"):
        with httpx.Client(transport=transport) as client:
            assert client.post("http://h/v1/chat/completions", json=BODY).json() == {
                "mocked": True}
    assert len(seen) == 1
    assert [r["type"] for r in lines_of(tmp_path / "c.jsonl")] == ["header"]
