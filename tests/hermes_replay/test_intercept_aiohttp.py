"""aiohttp (atroposlib's vLLM/SGLang /generate path): record, replay, pass-through."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from _core_helpers import TinyServer, lines_of

import hermes_replay
from hermes_replay.scripted_endpoint import ScriptedEndpoint

VLLM = {"prompt": {"prompt_token_ids": [1, 2, 3, 4]}, "logprobs": 0, "n": 2, "max_tokens": 8,
        "temperature": 1.0}
SGLANG = {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 8},
          "return_logprob": True}


async def _generate(root: str) -> list:
    out = []
    async with aiohttp.ClientSession() as session:
        for body in (VLLM, SGLANG):
            with hermes_replay.rollout("g"):
                # exactly how atroposlib's VLLMServer / SGLangServer call it
                async with session.post(f"{root}/generate", json=body,
                                        headers={"Authorization": "Bearer sk-abcdefghijklmnop1234"},
                                        timeout=aiohttp.ClientTimeout(total=30)) as response:
                    response.raise_for_status()
                    out.append(await response.json())
    return out


async def test_generate_round_trip_with_endpoint_stopped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=4) as ep:
        root = ep.root_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await _generate(root)
    async with hermes_replay.cassette(path, "replay") as session:
        assert await _generate(root) == recorded
    assert session.summary().interactions == 2
    records = [r for r in lines_of(path) if r["type"] == "interaction"]
    assert [r["kind"] for r in records] == ["generate", "generate"]
    assert lines_of(path)[0]["endpoint_type"] == "vllm"
    assert "sk-abcdefghijklmnop1234" not in path.read_text()


async def test_replayed_response_behaves_like_aiohttp_own(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        url = ep.root_url + "/generate"
        async with hermes_replay.cassette(path, "record"), aiohttp.ClientSession() as s:
            async with s.post(url, json=VLLM) as r:
                raw = await r.read()
                # the body stays readable in every way after the recorder read it
                assert [chunk async for chunk in r.content.iter_any()] == [raw]
                assert await r.text() == raw.decode()
    async with hermes_replay.cassette(path, "replay"), aiohttp.ClientSession() as s:
        async with s.post(url, json=VLLM) as r:
            assert r.status == 200 and r.ok
            assert r.headers["Content-Type"].startswith("application/json")
            assert await r.json() == __import__("json").loads(raw)
            assert await r.text() == raw.decode()
            assert b"".join([c async for c in r.content.iter_any()]) == raw
        # a miss ends the request at once (no retry layer catches it); the block says why
        with pytest.raises(hermes_replay.CassetteMiss) as info:
            async with hermes_replay.cassette(path, "replay"):
                with pytest.raises(hermes_replay.RequestNotRecorded):
                    await s.post(url, json={**VLLM, "max_tokens": 9})
        assert "-body.max_tokens: 8" in str(info.value)
        assert "+body.max_tokens: 9" in str(info.value)


async def test_trajectory_api_passes_through_and_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with TinyServer() as api:
        for mode in ("record", "replay"):
            async with hermes_replay.cassette(path, mode), aiohttp.ClientSession() as s:
                for route in ("/register-env", "/scored_data", "/scored_data_list"):
                    async with s.post(api.url + route, json={"group": [1, 2]}) as r:
                        assert (await r.json())["path"] == route
                async with s.get(api.url + "/batch") as r:
                    assert r.status == 200
    assert len(api.requests) == 8
    assert [r["type"] for r in lines_of(path)] == ["header"]


async def test_replay_answers_health_checks_of_recorded_hosts(tmp_path: Path) -> None:
    """atroposlib's VLLMServer polls GET /health and waits until it answers."""
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        root = ep.root_url
        async with hermes_replay.cassette(path, "record"), aiohttp.ClientSession() as s:
            async with s.post(root + "/generate", json=VLLM) as r:
                assert r.status == 200
    async with hermes_replay.cassette(path, "replay"), aiohttp.ClientSession() as s:
        async with s.get(root + "/health") as r:
            r.raise_for_status()
        with pytest.raises(aiohttp.ClientConnectionError):  # other hosts are not faked
            async with s.get("http://127.0.0.1:9/health"):
                pass
    assert [r["type"] for r in lines_of(path)] == ["header", "interaction"]


async def test_atroposlib_vllm_server_generate_round_trip(tmp_path: Path) -> None:
    """Phase-2 traffic: atroposlib's VLLMServer posts /generate over aiohttp."""
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager

    from hermes_replay._tokenizers.bundled import tokenizer_path

    path = tmp_path / "vllm.jsonl"

    async def run(base: str) -> list:
        manager = ServerManager([APIServerConfig(
            model_name="m", base_url=base, api_key="sk-vllm-0123456789abcdefgh",
            server_type="vllm", tokenizer_name=tokenizer_path(), timeout=10)])
        out = []
        for slot in range(2):
            with hermes_replay.rollout(f"train-v-0-{slot}"):
                out.append(await manager.tokens_and_logprobs_completion(
                    prompt="Hello there", n=2, max_tokens=8, temperature=1.0, model="m"))
        return out

    with ScriptedEndpoint(script="generic", seed=8) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(base)
    async with hermes_replay.cassette(path, "replay", strict=True):
        assert await run(base) == recorded
    assert recorded[0] != recorded[1]
    assert "sk-vllm-0123456789abcdefgh" not in path.read_text()
