"""Example (b): open-ended questions scored by an LLM judge, with a keyword fallback.

The judge is the same inference server (``self.server.chat_completion``) asked for a JSON
``{"score": 0-10, "reason": ...}``; when the call fails or the reply does not parse, the reward is
the fraction of the item's keywords found in the answer, scaled to at most ``fallback_max``
(0.4). The cap is there because ``hermes-replay probe`` found the uncapped fallback paid 1.0 for
a bag of keywords whenever the judge failed to answer in JSON (which an answer can ask it to
do); a heuristic must not pay what the judge's approval pays. The judge runs inside the
rollout's identity scope, so record/replay sees it as part of the rollout.

    python environments/research_judge_env.py evaluate --env.eval_size 4 \
        --env.data_dir_to_save_evals out/research_eval \
        --openai.base_url <URL> --openai.model_name <MODEL> --openai.server_type openai
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from pydantic import Field

from environments.agent_loop import AgentResult
from environments.helpers import (
    default_server_configs,
    final_response,
    load_items,
    mean,
    split_items,
)
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

logger = logging.getLogger(__name__)

BUILTIN_QUESTIONS: list[dict[str, Any]] = [
    {"question": "Why does the sky look blue during the day?",
     "reference": "Sunlight is scattered by air molecules; shorter blue wavelengths scatter "
                  "more strongly (Rayleigh scattering), so blue light reaches us from all "
                  "directions.",
     "keywords": ["scattering", "rayleigh", "wavelength", "molecules", "sunlight"]},
    {"question": "What causes the seasons on Earth?",
     "reference": "The tilt of Earth's axis (about 23.5 degrees) changes the angle and "
                  "duration of sunlight each hemisphere receives over the orbit.",
     "keywords": ["tilt", "axis", "angle", "sunlight", "hemisphere", "orbit"]},
    {"question": "How do vaccines train the immune system?",
     "reference": "They present antigens from a pathogen so the immune system makes "
                  "antibodies and memory cells without causing the disease.",
     "keywords": ["antigen", "antibodies", "memory", "immune", "pathogen"]},
    {"question": "Why is the ocean salty?",
     "reference": "Rivers carry dissolved minerals from eroded rocks into the sea; evaporation "
                  "removes water but leaves salts such as sodium chloride behind.",
     "keywords": ["minerals", "rivers", "rocks", "evaporation", "sodium", "chloride"]},
    {"question": "What does a compiler do?",
     "reference": "It translates source code into machine code or bytecode, checking syntax "
                  "and types and optimizing the program.",
     "keywords": ["translates", "source", "machine", "code", "syntax", "optimizing"]},
    {"question": "How does photosynthesis store energy?",
     "reference": "Plants use light energy with chlorophyll to turn carbon dioxide and water "
                  "into glucose and oxygen, storing energy in chemical bonds.",
     "keywords": ["light", "chlorophyll", "carbon", "glucose", "oxygen", "chemical"]},
]

JUDGE_SYSTEM = (
    "You are a strict grader. Judge the answer against the reference answer for correctness "
    "and completeness. Reply ONLY with JSON: {\"score\": <integer 0-10>, \"reason\": \"...\"}."
)
_SCORE = re.compile(r"\{.*\}", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")


class ResearchJudgeEnvConfig(HermesAgentEnvConfig):
    enabled_toolsets: list[str] | str | None = Field(
        default=["todo"], description="Toolsets offered to the model (a todo list to plan).")
    dataset_name: str | None = Field(
        default=None, description="Optional HF dataset with question/reference/keywords; "
        "never downloaded when offline, built-in questions otherwise.")
    judge_max_tokens: int = Field(default=256, ge=16, description="Token limit of a judge reply.")
    judge_temperature: float = Field(default=0.0, ge=0.0, description="Judge temperature.")
    fallback_max: float = Field(
        default=0.4, ge=0.0, le=1.0, description="The most the keyword fallback gives when the "
        "judge fails: below a judge's approval, so keyword stuffing never pays like an answer.")


class ResearchJudgeEnv(HermesAgentBaseEnv):
    name = "research-judge"
    env_config_cls = ResearchJudgeEnvConfig
    default_toolsets = ("todo",)
    known_good_field = "reference"  # `hermes-replay probe` answers with the reference answer
    config: ResearchJudgeEnvConfig

    @classmethod
    def config_init(cls) -> tuple[ResearchJudgeEnvConfig, list[Any]]:
        # No provider assumed: endpoint/model from flags or YAML, key from the environment.
        env_config = ResearchJudgeEnvConfig(max_agent_turns=6, group_size=4, eval_size=4)
        return env_config, default_server_configs()

    async def setup(self) -> None:
        items = load_items(self.config.dataset_name, "train", _from_row, BUILTIN_QUESTIONS)
        self._items, self._eval_items = split_items(items, self.config.split_seed,
                                                    self.config.eval_size)
        self._index = 0
        self._reward_buffer: list[float] = []
        self._judge_fallback_buffer: list[int] = []

    async def get_next_item(self) -> dict[str, Any]:
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, Any]) -> str:
        return (f"Research question: {item['question']}\n"
                "Think it through (you may keep a todo list), then answer in a short paragraph.")

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        answer = final_response(result.messages)
        if not answer:
            score = 0.0
        else:
            judged = await self._llm_judge(item, answer)
            self._judge_fallback_buffer.append(int(judged is None))
            score = judged if judged is not None else self.fallback_score(answer, item)
        self._reward_buffer.append(score)
        return score

    def fallback_score(self, answer: str, item: dict[str, Any]) -> float:
        """The reward when the judge fails: keyword overlap, capped at ``fallback_max``."""
        return self.config.fallback_max * keyword_overlap(answer, item["keywords"])

    async def _llm_judge(self, item: dict[str, Any], answer: str) -> float | None:
        """The judge's score in [0, 1], or None when the call or its JSON fails."""
        prompt = (f"Question: {item['question']}\nReference answer: {item['reference']}\n"
                  f"Answer to grade: {answer}\nScore 0-10 as JSON.")
        try:
            response = await self.server.chat_completion(
                messages=[{"role": "system", "content": JUDGE_SYSTEM},
                          {"role": "user", "content": prompt}],
                n=1, temperature=self.config.judge_temperature,
                max_tokens=self.config.judge_max_tokens,
                split="eval" if self.in_evaluation else "train")
            return parse_judge_score(response.choices[0].message.content or "")
        except Exception as exc:
            logger.warning("judge call failed (%s); using keyword overlap", exc)
            return None

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        rollouts = await self.run_eval_rollouts(self._eval_items[: self.config.eval_size])
        samples = [{"question": r.item["question"], "response": final_response(r.messages),
                    "reward": r.reward, "turns_used": r.turns_used,
                    "rollout_id": r.rollout_id} for r in rollouts]
        rewards = [r.reward for r in rollouts]
        metrics = {"eval/mean_reward": mean(rewards),
                   "eval/answered": mean([1.0 if s["response"] else 0.0 for s in samples])}
        await self.evaluate_log(metrics=metrics, samples=samples, start_time=start,
                                end_time=time.time(),
                                generation_parameters={"temperature": 0.0})

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        if self._reward_buffer:
            metrics["train/mean_reward"] = mean(self._reward_buffer)
            self._reward_buffer.clear()
        if self._judge_fallback_buffer:
            metrics["train/judge_fallback_rate"] = mean(
                [float(x) for x in self._judge_fallback_buffer])
            self._judge_fallback_buffer.clear()
        await super().wandb_log(metrics)


def parse_judge_score(text: str) -> float | None:
    """``{"score": n}`` somewhere in ``text`` → a float in [0, 1], else None.

    The judge is asked for an integer 0-10, so a whole number is read on that scale (``1`` is
    0.1 — `hermes-replay probe` caught the first version reading it as 1.0, full marks for a
    refusal the judge gave 1/10); only a fraction below 1 (``0.4``) is read as already 0-1.
    """
    match = _SCORE.search(text or "")
    if not match:
        return None
    try:
        score = float(json.loads(match.group(0))["score"])
    except (ValueError, KeyError, TypeError):
        return None
    if score > 1.0 or float(score).is_integer():
        score /= 10.0
    return min(1.0, max(0.0, score))


def keyword_overlap(answer: str, keywords: list[str]) -> float:
    """Fraction of keywords (prefix match per word, so 'scatter' finds 'scattering')."""
    if not keywords:
        return 0.0
    words = set(_WORD.findall(answer.lower()))
    hits = sum(1 for k in keywords if any(w.startswith(k.lower()[:6]) for w in words))
    return hits / len(keywords)


def _from_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if {"question", "reference"} <= set(row):
        keywords = row.get("keywords") or _WORD.findall(str(row["reference"]).lower())[:6]
        return {"question": str(row["question"]), "reference": str(row["reference"]),
                "keywords": list(keywords)}
    return None


if __name__ == "__main__":
    ResearchJudgeEnv.cli()
