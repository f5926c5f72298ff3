"""Example (a): terminal_test_env — binary verification with pytest in the agent's sandbox."""

from __future__ import annotations

import sys
import types

import pytest
from _hermes_env_helpers import make_env
from atroposlib.envs.base import BaseEnv

from environments import _examples
from environments._ids import task_id_for
from environments.agent_loop import AgentResult
from environments.terminal_test_env import BUILTIN_TASKS, TerminalTestEnv
from environments.tool_context import ToolContext
from hermes_replay.scripted_endpoint import ScriptedEndpoint
from hermes_replay.scripted_endpoint.scripts.examples import SOLUTIONS

TASK = next(t for t in BUILTIN_TASKS if t["id"] == "add")


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


@pytest.mark.parametrize(("code", "expected"), [
    (SOLUTIONS["add"][0], 1.0),   # correct
    (SOLUTIONS["add"][1], 0.0),   # buggy
    (None, 0.0),                  # never wrote the file
])
async def test_reward_runs_the_hidden_tests_in_the_sandbox(endpoint, code, expected):
    env = make_env(TerminalTestEnv, endpoint.base_url)
    await env.setup()
    ctx = ToolContext(task_id_for(f"test-terminal-{expected}-{code is None}"))
    try:
        if code is not None:
            await ctx.awrite_file("solution.py", code)
        reward = await env.compute_reward(TASK, AgentResult(messages=[]), ctx)
    finally:
        await ctx.acleanup()
    assert reward == expected
    assert env._pass_buffer == [expected]


async def test_groups_have_binary_rewards_that_vary(endpoint):
    env = make_env(TerminalTestEnv, endpoint.base_url)
    await env.setup()
    scores = []
    for _ in range(3):
        group, _ = await env.collect_trajectories(await env.get_next_item())
        scores += group["scores"]
    assert set(scores) <= {0.0, 1.0}
    assert set(scores) == {0.0, 1.0}, scores


async def test_evaluate_runs_the_agent_loop_with_tools_at_temperature_zero(endpoint, tmp_path):
    env = make_env(TerminalTestEnv, endpoint.base_url, eval_size=2,
                   data_dir_to_save_evals=str(tmp_path))
    await env.setup()
    endpoint.requests.clear()
    await env.evaluate()
    chats = [body for path, body in endpoint.requests if path == "/v1/chat/completions"]
    assert chats and all(b["temperature"] == 0.0 and b.get("tools") for b in chats)
    assert (tmp_path / "metrics.json").is_file() and (tmp_path / "samples.jsonl").is_file()


async def test_wandb_log_adds_pass_rate_then_calls_super(endpoint, monkeypatch):
    env = make_env(TerminalTestEnv, endpoint.base_url, group_size=2)
    await env.setup()
    seen = []

    async def fake_base(self, metrics=None):
        seen.append(metrics)

    monkeypatch.setattr(BaseEnv, "wandb_log", fake_base)
    await env.collect_trajectories(await env.get_next_item())
    await env.wandb_log()
    assert "train/pass_rate" in seen[0] and "train/tool_errors_per_rollout" in seen[0]


def test_split_is_seeded_and_disjoint():
    train, evals = _examples.split_items(BUILTIN_TASKS, seed=3, eval_size=4)
    again = _examples.split_items(BUILTIN_TASKS, seed=3, eval_size=4)
    assert (train, evals) == again
    assert len(evals) == 2 and len(train) == 4  # at most a third held out
    assert not {t["id"] for t in train} & {t["id"] for t in evals}


def test_dataset_load_is_skipped_offline(monkeypatch):
    boom = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise AssertionError("tried to load a dataset while offline")

    boom.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", boom)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    items = _examples.load_items("some/dataset", "train", dict, BUILTIN_TASKS)
    assert items == BUILTIN_TASKS


def test_dataset_failure_falls_back_quietly(monkeypatch):
    broken = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise ConnectionError("no network")

    broken.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", broken)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    assert _examples.load_items("x/y", "train", dict, BUILTIN_TASKS) == BUILTIN_TASKS
