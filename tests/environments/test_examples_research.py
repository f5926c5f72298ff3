"""Example (b): research_judge_env — LLM judge through self.server, capped keyword fallback."""

from __future__ import annotations

import pytest
from _hermes_env_helpers import make_env

from environments.research_judge_env import (
    BUILTIN_QUESTIONS,
    ResearchJudgeEnv,
    keyword_overlap,
    parse_judge_score,
)
from hermes_replay import current_rollout
from hermes_replay.scripted_endpoint import Reply, Rule, Script, ScriptedEndpoint
from hermes_replay.scripted_endpoint.scripts.examples import example_rules

ITEM = BUILTIN_QUESTIONS[0]


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


@pytest.mark.parametrize(("text", "expected"), [
    ('{"score": 7, "reason": "ok"}', 0.7),
    ('Sure! {"score": 10}', 1.0),
    ('{"score": 0.4}', 0.4),
    ('{"score": 1}', 0.1),  # the integer scale the judge is asked for: 1/10, not full marks
    ('{"score": 0}', 0.0),
    ('{"score": 7.5}', 0.75),
    ('{"score": 42}', 1.0),
    ('{"score": -3}', 0.0),
    ("I would give it a 7", None),
    ('{"grade": 7}', None),
    ('{"score": "high"}', None),
    ("", None),
])
def test_parse_judge_score(text, expected):
    assert parse_judge_score(text) == expected


def test_keyword_overlap():
    assert keyword_overlap("Rayleigh scattering of short wavelengths", ITEM["keywords"]) == 0.6
    assert keyword_overlap("no idea", ITEM["keywords"]) == 0.0
    assert keyword_overlap("anything", []) == 0.0


async def test_judge_runs_inside_the_rollout_scope_and_scores_vary(endpoint, monkeypatch):
    env = make_env(ResearchJudgeEnv, endpoint.base_url)
    await env.setup()
    judged_in: list[str | None] = []
    real = env.server.chat_completion

    async def spy(**kwargs):
        if not kwargs.get("tools"):  # the judge request (agent turns carry tools)
            scope = current_rollout()
            judged_in.append(scope.id if scope else None)
        return await real(**kwargs)

    monkeypatch.setattr(env.server, "chat_completion", spy)
    scores = []
    for _ in range(3):
        group, _ = await env.collect_trajectories(await env.get_next_item())
        scores += group["scores"]
    assert judged_in and all(rid and rid.startswith("train-") for rid in judged_in)
    assert all(0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 2


def _bad_judge(conv, rng):
    return Reply(content="This answer is decent, maybe a seven.")


async def test_unparseable_judge_falls_back_to_capped_keyword_overlap():
    script = Script("bad-judge", [Rule("judge", lambda c: c.is_judge, _bad_judge),
                                  *example_rules()])
    with ScriptedEndpoint(script=script, seed=1) as ep:
        env = make_env(ResearchJudgeEnv, ep.base_url, group_size=2)
        await env.setup()
        group, _ = await env.collect_trajectories(ITEM)
    for messages, score in zip(group["messages"], group["scores"], strict=True):
        answer = next(m["content"] for m in reversed(messages)
                      if m["role"] == "assistant" and m.get("content"))
        assert score == pytest.approx(0.4 * keyword_overlap(answer, ITEM["keywords"]))
    assert env._judge_fallback_buffer == [1, 1]


async def test_keyword_stuffing_never_pays_like_an_answer_when_the_judge_fails():
    soup = " ".join(ITEM["keywords"])  # every keyword, no sentence: overlap 1.0

    def soup_reply(conv, rng):
        return Reply(content=soup)

    script = Script("soup", [Rule("judge", lambda c: c.is_judge, _bad_judge),
                             Rule("soup", lambda c: True, soup_reply)])
    with ScriptedEndpoint(script=script, seed=1) as ep:
        env = make_env(ResearchJudgeEnv, ep.base_url, group_size=2)
        await env.setup()
        group, _ = await env.collect_trajectories(ITEM)
    assert keyword_overlap(soup, ITEM["keywords"]) == 1.0
    assert group["scores"] == [pytest.approx(0.4)] * 2


async def test_judge_call_failure_falls_back(endpoint, monkeypatch):
    env = make_env(ResearchJudgeEnv, endpoint.base_url, group_size=2)
    await env.setup()
    real = env.server.chat_completion

    async def judge_down(**kwargs):
        if not kwargs.get("tools"):
            raise ConnectionError("judge endpoint down")
        return await real(**kwargs)

    monkeypatch.setattr(env.server, "chat_completion", judge_down)
    group, _ = await env.collect_trajectories(ITEM)
    assert len(group["scores"]) == 2 and all(0.0 <= s <= 1.0 for s in group["scores"])
    assert env._judge_fallback_buffer == [1, 1]
    await env.wandb_log()
    assert env.last_wandb_metrics["train/judge_fallback_rate"] == 1.0
    assert env.last_wandb_metrics["train/reward_errors"] == 0  # fallback is not an error


async def test_evaluate_logs_through_evaluate_log(endpoint, tmp_path):
    env = make_env(ResearchJudgeEnv, endpoint.base_url, eval_size=2,
                   data_dir_to_save_evals=str(tmp_path))
    await env.setup()
    await env.evaluate()
    import json

    metrics = json.loads((tmp_path / "metrics.json").read_text())["results"]["all"]
    assert 0.0 <= metrics["eval/mean_reward"] <= 1.0
    assert len((tmp_path / "samples.jsonl").read_text().splitlines()) == 2
