"""HermesAgentBaseEnv against the scripted endpoint on loopback: groups, tokens, scopes, errors."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _hermes_env_helpers import Recorder, make_env, unmasked_text
from atroposlib.envs.base import BaseEnv

from environments import _rollout
from environments._config import (
    PLACEHOLDER_API_KEY,
    default_server_configs,
    normalize_server_configs,
)
from environments._ids import item_fingerprint, task_id_for
from environments.multi_signal_env import MultiSignalEnv
from environments.tool_context import ToolContext
from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_fingerprint
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ITEM = {"id": "sum_1_100", "question": "What is the sum of the integers from 1 to 100?",
        "answer": "5050"}


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


async def _env(endpoint: ScriptedEndpoint, cls: type = MultiSignalEnv, **overrides: Any) -> Any:
    env = make_env(cls, endpoint.base_url, **overrides)
    await env.setup()
    return env


# -- Phase 1 tokens and masks ------------------------------------------------------------------

async def test_phase1_tokens_come_from_the_chat_template_and_mask_everything_but_the_model(
        endpoint):
    env = await _env(endpoint)
    group, backlog = await env.collect_trajectories(ITEM)
    assert backlog == []
    assert len(group["tokens"]) == len(group["masks"]) == len(group["scores"]) == 4
    assert "inference_logprobs" not in group  # Phase 1 has none
    tools, _ = env._resolve_tools_for_group()
    rows = zip(group["tokens"], group["masks"], group["messages"], strict=True)
    for tokens, masks, messages in rows:
        assert len(tokens) == len(masks)
        rendered = env.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        assert env.tokenizer.decode(tokens) == rendered  # real tokens, the whole conversation
        assert all(m in (-100, t) for t, m in zip(tokens, masks, strict=True))
        trained = unmasked_text(env.tokenizer, tokens, masks)
        for msg in messages:
            text = msg.get("content") or ""
            if msg["role"] == "assistant" and text:
                assert text in trained
            elif msg["role"] in ("user", "tool", "system") and text:
                assert text not in trained, f"{msg['role']} text is trained on"
        assert "<|im_start|>" not in trained  # role headers and generation prompts are masked
        assert trained.count("<|im_end|>") == sum(m["role"] == "assistant" for m in messages)


# -- group mechanics ---------------------------------------------------------------------------

async def test_tools_resolved_once_and_each_slot_gets_its_own_rollout_and_task_id(
        endpoint, monkeypatch):
    env = await _env(endpoint)
    calls = []
    original = env._resolve_tools_for_group
    monkeypatch.setattr(env, "_resolve_tools_for_group",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    task_ids = []
    real_ctx = _rollout.ToolContext

    def spy_ctx(task_id, backend=None):
        task_ids.append(task_id)
        return real_ctx(task_id, backend=backend)

    monkeypatch.setattr(_rollout, "ToolContext", spy_ctx)
    with Recorder() as rec:
        await env.collect_trajectories(ITEM)
        await env.collect_trajectories(ITEM)
    assert len(calls) == 2  # once per group, not per rollout
    fp = item_fingerprint(ITEM)
    ids = [s.id for s in rec.scopes]
    assert sorted(ids) == sorted(f"train-{fp}-{occ}-{slot}" for occ in (0, 1)
                                 for slot in range(4))
    assert sorted(task_ids) == sorted(task_id_for(i) for i in ids)
    assert len(set(task_ids)) == 8
    outcome = rec.scopes[0].outcome
    assert outcome["phase"] == "train" and outcome["group"] == fp
    assert 0.0 <= outcome["reward"] <= 1.0 and outcome["turns_used"] >= 1
    assert {"finished_naturally", "tool_errors"} <= set(outcome)


class ChatOnlyEnv(MultiSignalEnv):
    """No tools and a prompt the script answers in one turn: each rollout is one request."""

    def format_prompt(self, item):
        return f"Say hello to {item['id']}."


async def test_rollouts_of_a_group_run_concurrently():
    with ScriptedEndpoint(script="examples", seed=0, latency=(1.0, 1.0)) as ep:
        env = await _env(ep, ChatOnlyEnv, group_size=4, enabled_toolsets=[])
        group, _ = await env.collect_trajectories(ITEM)
    assert [sum(m["role"] == "assistant" for m in msgs) for msgs in group["messages"]] == [1] * 4
    assert ep.max_in_flight == 4  # one after the other would be 1 at a time


async def test_annotate_names_env_and_tokenizer_once(endpoint):
    env = await _env(endpoint)
    with Recorder() as rec:
        await env.collect_trajectories(ITEM)
        await env.collect_trajectories(ITEM)
    assert rec.annotations == [{"env_name": "multi-signal", "tokenizer": {
        "name": TOKENIZER_NAME, "fingerprint": tokenizer_fingerprint()},
        "reward_range": [0.0, 1.0]}]


# -- failures ----------------------------------------------------------------------------------

class FlakyRewardEnv(MultiSignalEnv):
    calls = 0

    async def compute_reward(self, item, result, ctx):
        type(self).calls += 1
        if type(self).calls % 2 == 0:
            raise RuntimeError("reward bug")
        return await super().compute_reward(item, result, ctx)


async def test_raising_compute_reward_gives_zero_is_logged_and_counted(endpoint, caplog,
                                                                       monkeypatch):
    env = await _env(endpoint, FlakyRewardEnv)
    cleaned: list[str] = []
    real_cleanup = ToolContext.acleanup

    async def spy_cleanup(self):
        cleaned.append(self.task_id)
        await real_cleanup(self)

    monkeypatch.setattr(ToolContext, "acleanup", spy_cleanup)
    with caplog.at_level(logging.ERROR, logger="environments._rollout"):
        group, _ = await env.collect_trajectories(ITEM)
    assert len(group["scores"]) == 4  # the group survives
    assert group["scores"].count(0.0) >= 2
    failures = [r for r in caplog.records if "compute_reward raised" in r.getMessage()]
    assert len(failures) == 2
    assert all(f"train-{item_fingerprint(ITEM)}-0-" in r.getMessage() for r in failures)
    assert len(cleaned) == 4  # ToolContext cleanup ran for every rollout, failed or not
    await env.wandb_log({})
    assert env.last_wandb_metrics["train/reward_errors"] == 2


async def test_toolcontext_cleanup_runs_even_when_the_loop_raises(endpoint, monkeypatch):
    env = await _env(endpoint)
    cleaned: list[str] = []

    async def spy_cleanup(self):
        cleaned.append(self.task_id)

    async def broken_run(self, messages):
        raise RuntimeError("loop exploded")

    monkeypatch.setattr(ToolContext, "acleanup", spy_cleanup)
    monkeypatch.setattr(_rollout.HermesAgentLoop, "run", broken_run)
    with pytest.raises(RuntimeError, match="loop exploded"):
        await env.collect_trajectories(ITEM)
    assert len(cleaned) == 4


# -- wandb_log -----------------------------------------------------------------------------------

async def test_wandb_log_adds_tool_error_metrics_then_calls_atroposlib(endpoint, monkeypatch):
    env = await _env(endpoint)
    seen: list[dict] = []

    async def fake_base(self, metrics=None):
        seen.append(dict(metrics))

    monkeypatch.setattr(BaseEnv, "wandb_log", fake_base)
    for _ in range(3):
        await env.collect_trajectories(await env.get_next_item())
    await env.wandb_log({"custom/x": 1})
    assert len(seen) == 1
    metrics = seen[0]
    assert metrics["custom/x"] == 1
    assert {"train/tool_errors_per_rollout", "train/rollouts_with_tool_errors",
            "train/turns_per_rollout", "train/correctness"} <= set(metrics)
    assert env._tool_error_buffer == [] and env._signal_buffer["correctness"] == []


# -- servers and config ------------------------------------------------------------------------

def test_config_init_returns_a_list_and_assumes_no_provider(monkeypatch):
    for var in ("HERMES_BASE_URL", "HERMES_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    config, servers = MultiSignalEnv.config_init()
    assert isinstance(servers, list) and len(servers) == 1
    assert servers[0].base_url == "" and servers[0].api_key == PLACEHOLDER_API_KEY
    assert servers[0].health_check is False
    assert type(config).model_fields["max_agent_turns"].description
    with pytest.raises(ValueError, match=r"(?s)OpenRouter.*vLLM.*OpenAI-compatible.*Atropos"):
        normalize_server_configs(servers)


def test_api_key_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("HERMES_API_KEY", "sk-from-env")
    assert default_server_configs(base_url="http://x")[0].api_key == "sk-from-env"
    cfg = default_server_configs(base_url="http://x", api_key="")
    assert normalize_server_configs(cfg)[0].api_key == "sk-from-env"


def test_cli_strings_for_list_and_dict_fields_are_parsed():
    config_cls = MultiSignalEnv.env_config_cls
    config = config_cls(enabled_toolsets="terminal,file", extra_body='{"top_k": 5}')
    assert config.enabled_toolsets == ["terminal", "file"]
    assert config.extra_body == {"top_k": 5}


# -- Phase 2 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("server_type", ["vllm", "sglang"])
async def test_phase2_uses_managed_server_tokens_masks_and_logprobs(endpoint, server_type):
    env = make_env(MultiSignalEnv, endpoint.root_url, server_type=server_type)
    await env.setup()
    assert env.phase2
    group, _ = await env.collect_trajectories(ITEM)
    assert len(group["inference_logprobs"]) == 4
    for tokens, masks, logprobs, messages in zip(group["tokens"], group["masks"],
                                                 group["inference_logprobs"],
                                                 group["messages"], strict=True):
        assert len(tokens) == len(masks) == len(logprobs)
        trained = unmasked_text(env.tokenizer, tokens, masks)
        assistant = [m for m in messages if m["role"] == "assistant"]
        # one tracked sequence per rollout: every assistant turn is trained on
        assert trained.count("<|im_end|>") == len(assistant)
        assert "<tool_response>" not in trained and "Problem id" not in trained
        for lp, m in zip(logprobs, masks, strict=True):
            assert (lp == 1.0) if m == -100 else (lp <= 0.0)
        if any(m.get("tool_calls") for m in assistant):
            assert "<tool_call>" in trained


async def test_phase2_evaluate_runs_through_the_managed_server(endpoint, tmp_path):
    env = make_env(MultiSignalEnv, endpoint.root_url, server_type="vllm", eval_size=2,
                   data_dir_to_save_evals=str(tmp_path))
    await env.setup()
    endpoint.requests.clear()
    await env.evaluate()
    generated = [body for path, body in endpoint.requests if path == "/generate"]
    assert generated and not any(p == "/v1/chat/completions" for p, _ in endpoint.requests)
    assert (tmp_path / "metrics.json").is_file()


async def test_rollouts_of_the_same_item_drawn_again_get_new_occurrences(endpoint):
    env = await _env(endpoint, group_size=2)
    with Recorder() as rec:
        for _ in range(3):
            await env.collect_trajectories(ITEM)
    occurrences = sorted({s.id.rsplit("-", 2)[1] for s in rec.scopes})
    assert occurrences == ["0", "1", "2"]


async def test_collect_trajectory_single(endpoint):
    env = await _env(endpoint)
    scored, backlog = await env.collect_trajectory(ITEM)
    assert backlog == [] and 0.0 <= scored["scores"] <= 1.0
    assert len(scored["tokens"]) == len(scored["masks"]) and scored["messages"]

