"""Broken on purpose: compute_reward reads `result.final_response`, which AgentResult does not
have.

A copy of clean_env.py with one pitfall; `# check: <rule-id>` marks the expected line.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from pydantic import Field

from environments.agent_loop import AgentResult, HermesAgentLoop
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

ITEMS = [{"question": f"What is {n} + {n}?", "answer": str(2 * n)} for n in range(8)]


class ResultFieldsEnvConfig(HermesAgentEnvConfig):
    judge_weight: float = Field(default=0.6, description="Weight of the judge's score.")


def final_response(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "assistant" and msg.get("content"):
            return msg["content"]
    return ""


def tools_used(messages: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for msg in messages:
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function", {}) if isinstance(tc, dict) else getattr(tc, "function", None)
            name = fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)
            if name:
                names.append(name)
    return names


class ResultFieldsEnv(HermesAgentBaseEnv):
    name = "result-fields"
    env_config_cls = ResultFieldsEnvConfig
    default_toolsets = ("terminal",)

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[APIServerConfig]]:
        env_config = cls.env_config_cls(
            enabled_toolsets=list(cls.default_toolsets), group_size=2
        )
        server = APIServerConfig(
            base_url=os.environ.get(
                "HERMES_BASE_URL", "http://localhost:8000/v1"
            ),
            model_name=os.environ.get(
                "HERMES_MODEL", "default"
            ),
            server_type="openai",
            health_check=False,
        )
        return env_config, [server]

    async def setup(self) -> None:
        self._train_items = ITEMS[:6]
        self._eval_items = ITEMS[6:]
        self._index = 0
        self._reward_buffer: list[float] = []

    async def get_next_item(self) -> dict[str, str]:
        item = self._train_items[self._index % len(self._train_items)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, str]) -> str:
        return f"Answer with a number: {item['question']}"

    async def _llm_judge(self, item: dict[str, str], answer: str) -> float:
        completion = await self.server.chat_completion(
            messages=[{"role": "user", "content": f"Is {answer!r} equal to {item['answer']}?"}],
            n=1,
            temperature=0.0,
        )
        text = completion.choices[0].message.content or ""
        return 1.0 if "yes" in text.lower() else 0.0

    async def compute_reward(self, item: dict[str, str], result: AgentResult,
                             ctx: ToolContext) -> float:
        answer = result.final_response  # check: result-fields
        judged = await self._llm_judge(item, answer)
        used = 1.0 if tools_used(result.messages) else 0.0
        weight = self.config.judge_weight
        reward = max(0.0, min(1.0, weight * judged + (1.0 - weight) * used))
        self._reward_buffer.append(reward)
        return reward

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        tools, valid_names = self._resolve_tools_for_group()
        samples = []
        for item in self._eval_items[: self.config.eval_size]:
            task_id = str(uuid.uuid4())
            agent = HermesAgentLoop(
                server=self.server,
                tool_schemas=tools,
                valid_tool_names=valid_names,
                max_turns=self.config.max_agent_turns,
                task_id=task_id,
                temperature=0.0,
            )
            result = await agent.run(self.initial_messages(item))
            ctx = ToolContext(task_id)
            try:
                reward = await self.compute_reward(item, result, ctx)
            finally:
                ctx.cleanup()
            samples.append({"prompt": self.format_prompt(item),
                            "response": final_response(result.messages), "reward": reward})
        rewards = [s["reward"] for s in samples]
        await self.evaluate_log(
            metrics={"eval/mean_reward": sum(rewards) / max(len(rewards), 1)},
            samples=samples, start_time=start, end_time=time.time(),
        )

    async def wandb_log(self, wandb_metrics: dict | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        if self._reward_buffer:
            metrics["train/mean_reward"] = sum(self._reward_buffer) / len(self._reward_buffer)
        self._reward_buffer.clear()
        await super().wandb_log(metrics)


if __name__ == "__main__":
    ResultFieldsEnv.cli()
