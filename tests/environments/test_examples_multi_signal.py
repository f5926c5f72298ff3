"""Example (c): multi_signal_env — 0.6 correctness + 0.2 tool use + 0.2 efficiency + bonus."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from _hermes_env_helpers import make_env

from environments.agent_loop import AgentResult, ToolError
from environments.multi_signal_env import MultiSignalEnv
from hermes_replay.scripted_endpoint import ScriptedEndpoint

ITEM = {"id": "sum_1_100", "question": "What is the sum of the integers from 1 to 100?",
        "answer": "5050"}


def _result(final: str, calls: int = 0, errors: int = 0, turns: int = 1) -> AgentResult:
    messages = [{"role": "user", "content": "q"}]
    for i in range(calls):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "terminal", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "{}"})
    messages.append({"role": "assistant", "content": final})
    return AgentResult(messages=messages, turns_used=turns, finished_naturally=True,
                       tool_errors=[ToolError(1, "terminal", "{}", "exit code 1", "{}")] * errors)


@pytest.fixture
def env():
    env = make_env(MultiSignalEnv, "http://127.0.0.1:9/v1")
    env._signal_buffer = {k: [] for k in ("correctness", "tool_use", "efficiency", "bonus")}
    return env


@pytest.mark.parametrize(("result", "expected"), [
    (_result("ANSWER: 5050", calls=1, turns=2), 1.0),  # 0.6+0.2+0.2+0.1 clamped
    (_result("The result is ANSWER: 5050.", calls=1, turns=2), 1.0),  # no bonus, still 1.0
    (_result("ANSWER: 5051", calls=1, turns=2), 0.4),  # wrong: tool use + efficiency
    (_result("ANSWER: 5050", turns=1), 0.9),  # right, no tools: no tool-use signal
    (_result("ANSWER: 5051", turns=1), 0.2),  # guessed wrong
    (_result("ANSWER: 5050", calls=2, errors=2, turns=3), 0.6 + 0.1 + 0.15 + 0.1),
    (_result("no answer", calls=1, turns=6), 0.2),  # max turns: efficiency 0
])
async def test_reward_combines_the_signals(env, result, expected):
    assert await env.compute_reward(ITEM, result, ctx=None) == pytest.approx(expected)


async def test_the_signals_are_kept_with_the_rollout_as_its_rewards_parts(env):
    """What show, diff, snapshots and the report print beside the sum: each signal as the
    example's rule gives it for this reply (recomputed here, not read from the env)."""
    import hermes_replay

    result = _result("The result is ANSWER: 5051.", calls=1, turns=2)  # wrong, tool used
    with hermes_replay.rollout("train-parts-0-0") as scope:
        reward = await env.compute_reward(ITEM, result, ctx=None)
    assert scope.outcome["parts"] == {"correctness": 0.0, "tool_use": 1.0, "efficiency": 1.0,
                                      "bonus": 0.0}
    assert reward == pytest.approx(0.6 * 0.0 + 0.2 * 1.0 + 0.2 * 1.0)  # still a float


async def test_reward_is_always_clamped_to_unit_interval(env):
    finals = ("ANSWER: 5050", "ANSWER: 1", "", "5050")
    for final, calls, errors, turns in itertools.product(finals, (0, 1, 3), (0, 1, 3),
                                                         (1, 2, 6, 9)):
        reward = await env.compute_reward(ITEM, _result(final, calls, min(errors, calls),
                                                        turns), ctx=None)
        assert 0.0 <= reward <= 1.0
    env.config.format_bonus = 1.0
    assert await env.compute_reward(ITEM, _result("ANSWER: 5050", 1, 0, 2), None) == 1.0


async def test_groups_and_evaluate_against_the_endpoint(tmp_path):
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        env = make_env(MultiSignalEnv, ep.base_url, eval_size=2,
                       data_dir_to_save_evals=str(tmp_path))
        await env.setup()
        scores = []
        for _ in range(3):
            group, _ = await env.collect_trajectories(await env.get_next_item())
            scores += group["scores"]
        await env.evaluate()
    assert all(0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 2
    metrics = json.loads((tmp_path / "metrics.json").read_text())["results"]["all"]
    assert {"eval/mean_reward", "eval/correctness", "eval/tool_use", "eval/efficiency",
            "eval/bonus"} <= set(metrics)
    samples = [json.loads(s) for s in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert all({"correctness", "tool_use", "efficiency", "reward"} <= set(s) for s in samples)


def _parts_from_recording(cassette) -> dict[str, dict[str, float]]:
    """Each recorded rollout's four signals, worked out here from what it did — its model
    calls, its agent tool calls and their exit codes, its last reply — by the rule the
    module docstring states (ideal 2 turns, at most 6, bonus 0.1, as config_init sets)."""
    from environments.multi_signal_env import BUILTIN_PROBLEMS

    answers = {p["question"]: p["answer"] for p in BUILTIN_PROBLEMS}
    out = {}
    for rid, record in cassette.rollouts.items():
        calls = sorted(record.interactions, key=lambda i: i.seq)
        prompt = calls[0].request["body"]["messages"][-1]["content"]
        answer = next(a for q, a in answers.items() if q in prompt)
        final = calls[-1].response["body"]["choices"][0]["message"].get("content") or ""
        tools = [t for t in cassette.tool_calls if t.rollout == rid and t.source == "agent"]
        failed = sum(1 for t in tools if t.exit_code not in (0, None))
        found = re.search(r"ANSWER:\s*(-?[\d,\.]+)", final, re.IGNORECASE)
        right = found is not None and found[1].replace(",", "").rstrip(".") == answer
        turns = len(calls)
        out[rid] = {
            "correctness": 1.0 if right else 0.0,
            "tool_use": 0.0 if not tools else (1.0 if failed < len(tools) else 0.5),
            "efficiency": 1.0 if turns <= 2 else max(0.0, 1.0 - (turns - 2) / 4),
            "bonus": 0.1 if right and re.fullmatch(r"\s*ANSWER:\s*-?\d+\s*", final) else 0.0,
        }
    return out


def test_a_replay_of_the_shipped_cassette_shows_each_rollouts_own_signals(replay_run):
    """The parts a replay shows (snapshots, show, report) for the shipped recording, against
    the signals of each rollout's own recorded actions; their weighted sum is the reward the
    recording holds for that rollout."""
    from pathlib import Path

    from hermes_replay import load_cassette

    path = Path(__file__).resolve().parents[2] / "cassettes" / "multi_signal_env" / "process.jsonl"
    expected = _parts_from_recording(load_cassette(path))
    result = replay_run(path, strict=True)
    shown = {r.id: r.parts for r in result.rollouts}
    assert shown == expected and len(shown) == 12
    for rid, parts in expected.items():
        total = 0.6 * parts["correctness"] + 0.2 * parts["tool_use"] \
            + 0.2 * parts["efficiency"] + parts["bonus"]
        assert result.recorded_rewards[rid] == pytest.approx(min(1.0, total)), rid
