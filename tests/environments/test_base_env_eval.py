"""Evaluation cannot pollute training metric buffers — automatically, with no code in the env."""

from __future__ import annotations

import asyncio
import copy
from typing import ClassVar

import pytest
from _hermes_env_helpers import Recorder, make_env

from environments.multi_signal_env import MultiSignalEnv
from hermes_replay.scripted_endpoint import ScriptedEndpoint


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


async def test_example_evaluate_leaves_training_buffers_untouched(endpoint):
    env = make_env(MultiSignalEnv, endpoint.base_url)
    await env.setup()
    await env.collect_trajectories(await env.get_next_item())
    before = {name: copy.deepcopy(getattr(env, name))
              for name in ("_signal_buffer", "_tool_error_buffer", "_turns_buffer")}
    assert before["_signal_buffer"]["correctness"]  # training wrote something
    with Recorder() as rec:
        await env.evaluate()
    eval_scopes = [s for s in rec.scopes if s.outcome.get("phase") == "eval"]
    assert eval_scopes and all(s.id.startswith("eval-") for s in eval_scopes)
    for name, value in before.items():
        assert getattr(env, name) == value, f"{name} changed during evaluate"
    assert type(env._tool_error_buffer) is list


class SeedStyleEnv(MultiSignalEnv):
    """Written the way the seed shows: compute_reward appends, evaluate reuses compute_reward."""

    seen_in_eval: ClassVar[list[bool]] = []

    async def setup(self):
        await super().setup()
        self._reward_buffer = []
        self._scores = []  # not named *_buffer: declared below instead

    metric_buffers = ("_scores",)

    async def compute_reward(self, item, result, ctx):
        reward = await super().compute_reward(item, result, ctx)
        self._reward_buffer.append(reward)
        self._scores.append(reward)
        type(self).seen_in_eval.append(self.in_evaluation)
        return reward

    async def evaluate(self, *args, **kwargs):
        rollouts = await self.run_eval_rollouts(self._eval_items)
        # eval code may read its own results from what it just appended — it sees none of
        # the training entries' changes leak out afterwards
        return rollouts


async def test_seed_style_buffers_are_rolled_back_and_in_evaluation_is_visible(endpoint):
    env = make_env(SeedStyleEnv, endpoint.base_url, group_size=2)
    await env.setup()
    await env.collect_trajectories(await env.get_next_item())
    train_rewards = list(env._reward_buffer)
    train_scores = list(env._scores)
    SeedStyleEnv.seen_in_eval.clear()
    rollouts = await env.evaluate()
    assert rollouts and all(SeedStyleEnv.seen_in_eval)
    assert env._reward_buffer == train_rewards and env._scores == train_scores
    assert not env.in_evaluation


class ConcurrentEnv(MultiSignalEnv):
    """An evaluate that waits while a training task keeps appending (eval_handling NONE)."""

    async def setup(self):
        await super().setup()
        self._reward_buffer = [0.5]
        self.eval_started = asyncio.Event()
        self.train_done = asyncio.Event()

    async def evaluate(self, *args, **kwargs):
        self._reward_buffer.append(99.0)  # eval entry: must not survive
        self._reward_buffer.clear()  # eval may not wipe training data either
        self.eval_started.set()
        await self.train_done.wait()
        self._reward_buffer.extend([98.0, 97.0])


async def test_training_that_runs_during_evaluate_keeps_its_entries(endpoint):
    env = make_env(ConcurrentEnv, endpoint.base_url)
    await env.setup()
    eval_task = asyncio.create_task(env.evaluate())  # its own context, like atroposlib does
    await env.eval_started.wait()
    assert not env.in_evaluation  # this (training) task is not in evaluation
    env._reward_buffer.append(1.0)
    env._reward_buffer += [2.0]
    env.train_done.set()
    await eval_task
    assert env._reward_buffer == [0.5, 1.0, 2.0]
    assert type(env._reward_buffer) is list


class NestedEnv(SeedStyleEnv):
    calls = 0

    async def evaluate(self, *args, **kwargs):
        type(self).calls += 1
        self._reward_buffer.append(-1.0)
        return await super().evaluate(*args, **kwargs)


async def test_subclass_calling_super_evaluate_is_guarded_once(endpoint):
    env = make_env(NestedEnv, endpoint.base_url, group_size=2)
    await env.setup()
    env._reward_buffer.append(0.25)
    await env.evaluate()
    assert NestedEnv.calls == 1
    assert env._reward_buffer == [0.25]
    assert getattr(NestedEnv.evaluate, "_hermes_guarded", False)
