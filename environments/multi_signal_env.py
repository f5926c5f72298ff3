"""Example (c): a multi-signal reward — 0.6 correctness + 0.2 tool use + 0.2 efficiency + bonus.

Problems with a numeric answer that the agent should compute with the terminal and report as
``ANSWER: <number>``. Signals, all read from ``AgentResult``:

* correctness (0.6): the reported number equals the expected one;
* tool use (0.2): 1.0 if a tool ran without error, 0.5 if tools were used but every call failed;
* efficiency (0.2): 1.0 at or under ``ideal_turns`` model calls, falling linearly to 0 at
  ``max_agent_turns``;
* bonus (``format_bonus``): the final message is exactly ``ANSWER: <number>``.

The sum is clamped to [0, 1]; the four signals are kept with each rollout as its reward's
parts, so a snapshot, ``show``, ``diff`` and the report show which one moved
(``correctness 1 → 0``).

    python environments/multi_signal_env.py process --env.total_steps 2 --env.group_size 4 \
        --env.data_path_to_save_groups out/multi.jsonl \
        --openai.base_url <URL> --openai.model_name <MODEL> --openai.server_type openai
"""

from __future__ import annotations

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
    reward_parts,
    split_items,
    tools_used,
)
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig, item_fingerprint
from environments.tool_context import ToolContext

BUILTIN_PROBLEMS: list[dict[str, Any]] = [
    {"id": "sum_1_100", "question": "What is the sum of the integers from 1 to 100?",
     "answer": "5050"},
    {"id": "squares_1_10", "question": "What is the sum of the squares of 1 through 10?",
     "answer": "385"},
    {"id": "pow_2_20", "question": "What is 2 to the power of 20?", "answer": "1048576"},
    {"id": "fact_10", "question": "What is 10 factorial?", "answer": "3628800"},
    {"id": "primes_below_50", "question": "How many prime numbers are below 50?",
     "answer": "15"},
    {"id": "len_hermes_x7", "question": "How many characters are in 'hermes' repeated 7 times?",
     "answer": "42"},
]

_ANSWER = re.compile(r"ANSWER:\s*(-?[\d,\.]+)", re.IGNORECASE)
_EXACT = re.compile(r"^\s*ANSWER:\s*-?\d+\s*$")

WEIGHTS = {"correctness": 0.6, "tool_use": 0.2, "efficiency": 0.2}


class MultiSignalEnvConfig(HermesAgentEnvConfig):
    enabled_toolsets: list[str] | str | None = Field(
        default=["terminal"], description="Toolsets offered to the model.")
    dataset_name: str | None = Field(
        default=None, description="Optional HF dataset with id/question/answer columns; never "
        "downloaded when offline, built-in problems otherwise.")
    ideal_turns: int = Field(default=2, ge=1, description="Model calls that earn full efficiency.")
    format_bonus: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Bonus for a final 'ANSWER: <n>' message.")


class MultiSignalEnv(HermesAgentBaseEnv):
    name = "multi-signal"
    env_config_cls = MultiSignalEnvConfig
    default_toolsets = ("terminal",)
    config: MultiSignalEnvConfig

    @classmethod
    def config_init(cls) -> tuple[MultiSignalEnvConfig, list[Any]]:
        # No provider assumed: endpoint/model from flags or YAML, key from the environment.
        env_config = MultiSignalEnvConfig(max_agent_turns=6, group_size=4, eval_size=4)
        return env_config, default_server_configs()

    async def setup(self) -> None:
        items = load_items(self.config.dataset_name, "train", _from_row, BUILTIN_PROBLEMS)
        self._items, self._eval_items = split_items(items, self.config.split_seed,
                                                    self.config.eval_size)
        self._index = 0
        self._signal_buffer: dict[str, list[float]] = {k: [] for k in (*WEIGHTS, "bonus")}

    async def get_next_item(self) -> dict[str, Any]:
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, Any]) -> str:
        return (f"Problem id: {item['id']}. {item['question']}\n"
                "Compute it with the terminal, then reply with exactly 'ANSWER: <number>'.")

    def signals(self, item: dict[str, Any], result: AgentResult) -> dict[str, float]:
        """The reward's parts, each in [0, 1] (bonus in [0, format_bonus])."""
        final = final_response(result.messages)
        found = _ANSWER.search(final)
        reported = found.group(1).replace(",", "").rstrip(".") if found else None
        correctness = 1.0 if reported == str(item["answer"]) else 0.0
        calls = len(tools_used(result.messages))
        failed = len(result.tool_errors)
        tool_use = 0.0 if calls == 0 else (1.0 if failed < calls else 0.5)
        turns, ideal = max(1, result.turns_used), self.config.ideal_turns
        span = max(1, self.config.max_agent_turns - ideal)
        efficiency = 1.0 if turns <= ideal else max(0.0, 1.0 - (turns - ideal) / span)
        bonus = self.config.format_bonus if (_EXACT.match(final) and correctness) else 0.0
        return {"correctness": correctness, "tool_use": tool_use, "efficiency": efficiency,
                "bonus": bonus}

    def known_good_reply(self, item: dict[str, Any]) -> str:
        """For `hermes-replay probe`: the exact answer line (correct, well formatted)."""
        return f"ANSWER: {item['answer']}"

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        """The weighted sum of the signals, clamped to [0, 1]. The signals are kept with the
        rollout (``reward_parts``), so a review reads ``correctness 1 → 0``, not only the sum
        that moved; the reward stays a float for subclasses that build on it."""
        parts = self.signals(item, result)
        for name, value in parts.items():
            self._signal_buffer[name].append(value)
        reward_parts(parts)
        total = sum(WEIGHTS[k] * parts[k] for k in WEIGHTS) + parts["bonus"]
        return min(1.0, max(0.0, total))

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        rollouts = await self.run_eval_rollouts(self._eval_items[: self.config.eval_size])
        samples, parts = [], []
        for r in rollouts:
            signal = self.signals(r.item, r.result)
            parts.append(signal)
            samples.append({"id": r.item["id"], "question": r.item["question"],
                            "response": final_response(r.messages), "reward": r.reward,
                            **signal, "turns_used": r.turns_used, "rollout_id": r.rollout_id})
        metrics = {"eval/mean_reward": mean([r.reward for r in rollouts])}
        for name in (*WEIGHTS, "bonus"):
            metrics[f"eval/{name}"] = mean([p[name] for p in parts])
        await self.evaluate_log(metrics=metrics, samples=samples, start_time=start,
                                end_time=time.time(),
                                generation_parameters={"temperature": 0.0})

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        for name, values in self._signal_buffer.items():
            if values:
                metrics[f"train/{name}"] = mean(values)
                values.clear()
        await super().wandb_log(metrics)


def _from_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if {"question", "answer"} <= set(row):
        return {"id": str(row.get("id") or item_fingerprint(str(row["question"]))),
                "question": str(row["question"]), "answer": str(row["answer"]).strip()}
    return None


if __name__ == "__main__":
    MultiSignalEnv.cli()
