"""Rollout identity: concurrent identical requests each get their own recording back."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import openai
import pytest

import hermes_replay
from hermes_replay.scripted_endpoint import ScriptedEndpoint

MESSAGES = [{"role": "user", "content": "Pick a number."}]


async def _one(client: openai.AsyncOpenAI, rollout: str, delay: float) -> tuple[str, str]:
    await asyncio.sleep(delay)
    with hermes_replay.rollout(rollout):
        resp = await client.chat.completions.create(model="m", messages=MESSAGES,
                                                    temperature=1.0)
    return rollout, resp.model_dump_json()


async def test_group_of_identical_requests_replays_each_rollouts_own_sample(
        tmp_path: Path) -> None:
    path = tmp_path / "group.jsonl"
    rollouts = [f"train-item-0-{slot}" for slot in range(8)]
    with ScriptedEndpoint(script="generic", seed=11, latency=(0.0, 0.05)) as ep:
        base = ep.base_url
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
        async with hermes_replay.cassette(path, "record"):
            recorded = dict(await asyncio.gather(*[_one(client, r, 0.0) for r in rollouts]))
    assert len(set(recorded.values())) == 8  # identical requests, eight different samples

    rng = random.Random(1234)
    client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
    for _ in range(20):
        order = rollouts[:]
        rng.shuffle(order)
        async with hermes_replay.cassette(path, "replay") as session:
            replayed = dict(await asyncio.gather(
                *[_one(client, r, rng.uniform(0, 0.01)) for r in order]))
        assert replayed == recorded
        assert session.unused == []


async def test_identical_requests_outside_rollouts_replay_in_order_of_issue(
        tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    other = [{"role": "user", "content": "Something else."}]

    async def run(client: openai.AsyncOpenAI) -> list[str]:
        out = []
        for messages in (MESSAGES, other, MESSAGES, MESSAGES, other):
            resp = await client.chat.completions.create(model="m", messages=messages)
            out.append(resp.model_dump_json())
        return out

    with ScriptedEndpoint(script="generic", seed=3) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(openai.AsyncOpenAI(base_url=base, api_key="x"))
    assert len(set(recorded)) == 5
    async with hermes_replay.cassette(path, "replay"):
        assert await run(openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)) == recorded


@pytest.mark.parametrize("fault", ["5xx", "drop"])
async def test_failed_attempts_while_recording_take_no_sequence_number(
        tmp_path: Path, fault: str) -> None:
    path = tmp_path / "c.jsonl"

    async def run(client: openai.AsyncOpenAI) -> list[str]:
        with hermes_replay.rollout("r"):
            out = []
            for turn in range(3):
                messages = [*MESSAGES, {"role": "user", "content": f"turn {turn}"}]
                resp = await client.chat.completions.create(model="m", messages=messages)
                out.append(resp.model_dump_json())
            return out

    with ScriptedEndpoint(script="generic", seed=5) as ep:
        base = ep.base_url
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=3)
        async with hermes_replay.cassette(path, "record") as session:
            first = await client.chat.completions.create(model="m", messages=MESSAGES)
            assert first.choices  # warm-up, scope-less
            ep.fail_next(2, fault)  # the SDK retries turn 0 twice before it succeeds
            recorded = await run(client)
    assert session.summary().failed_attempts == 2
    cassette = hermes_replay.load_cassette(path)
    assert [i.seq for i in cassette.rollouts["r"].interactions] == [0, 1, 2]
    async with hermes_replay.cassette(path, "replay", strict=True):
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
        await client.chat.completions.create(model="m", messages=MESSAGES)
        assert await run(client) == recorded


async def test_concurrent_identical_requests_within_one_rollout_are_stable(
        tmp_path: Path) -> None:
    """atroposlib's ``n_kwarg_is_ignored`` sends n identical requests at once in one rollout."""
    path = tmp_path / "c.jsonl"

    async def run(client: openai.AsyncOpenAI) -> list[str]:
        with hermes_replay.rollout("n"):
            results = await asyncio.gather(*[
                client.chat.completions.create(model="m", messages=MESSAGES)
                for _ in range(4)])
        return [r.model_dump_json() for r in results]

    with ScriptedEndpoint(script="generic", seed=9, latency=(0.0, 0.03)) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(openai.AsyncOpenAI(base_url=base, api_key="x"))
    client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
    async with hermes_replay.cassette(path, "replay"):
        first = await run(client)
    async with hermes_replay.cassette(path, "replay"):
        second = await run(client)
    assert sorted(first) == sorted(recorded)  # every recorded sample, each used once
    assert first == second  # and replay to replay, in the same order
