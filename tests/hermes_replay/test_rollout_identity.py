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


async def test_identical_concurrent_requests_in_one_scope_keep_their_answers_across_retries(
        tmp_path: Path) -> None:
    """One scope, several identical requests gathered at once (atroposlib's split ``n``, or an
    env gathering ``group_size`` calls): their answers are joined in the order the tasks were
    created. While recording, the first task's first attempt fails and is retried, so it reaches
    the wire after its siblings; the replay (nothing fails) asks in creation order. Each task
    must still get the answer it got while recording."""
    path = tmp_path / "split.jsonl"

    async def group(client: openai.AsyncOpenAI) -> list[str]:
        with hermes_replay.rollout("train-item-0"):
            replies = await asyncio.gather(*[client.chat.completions.create(
                model="m", messages=MESSAGES, temperature=1.0) for _ in range(3)])
        return [r.choices[0].message.content or "" for r in replies]

    with ScriptedEndpoint(script="generic", seed=5) as ep:
        ep.fail_next(1, "5xx")  # the first to arrive: the first task created
        base = ep.base_url
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=2)
        async with hermes_replay.cassette(path, "record"):
            recorded = await group(client)
        arrivals = [body for _, body in ep.requests]
    assert len(arrivals) == 4 and len(set(recorded)) == 3  # a retry; three different answers
    for _ in range(5):
        client = openai.AsyncOpenAI(base_url=base, api_key="x", max_retries=0)
        async with hermes_replay.cassette(path, "replay") as session:
            assert await group(client) == recorded
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


def test_only_identical_requests_from_different_tasks_trade_places() -> None:
    from hermes_replay._session.lanes import in_creation_order

    issued = [("a", 9, "a@9"), ("b", 3, "b@3"), ("a", 7, "a@7"), ("a", 7, "a@7 again")]
    # the a's take the a-places in creation order (7 before 9; one task's two in issue order);
    # b keeps its place
    assert in_creation_order(issued) == ["a@7", "b@3", "a@7 again", "a@9"]
    # a request whose task has no readable creation number: that fingerprint stays as issued
    assert in_creation_order([("a", 9, 1), ("a", None, 2), ("a", 7, 3)]) == [1, 2, 3]
