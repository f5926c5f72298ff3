"""A user's environment with the two volatile habits issue 26 met: today's date and time in its
system prompt (``datetime.datetime.now()``), and an LLM judge in its reward. Used by the tests
of reward calls and of misses that follow from one cause (``test_reward_calls.py``)."""

from __future__ import annotations

import datetime
from typing import Any

from environments._config import default_server_configs
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

ITEMS = [{"id": i, "question": f"Name a prime larger than {10 * i}."} for i in range(4)]


class JudgeClockEnv(HermesAgentBaseEnv):
    name = "judge-clock"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(enabled_toolsets=[], max_agent_turns=2, group_size=2,
                                      eval_size=2)
        return config, default_server_configs()

    async def setup(self) -> None:
        self._index = 0

    async def get_next_item(self) -> dict[str, Any]:
        item = ITEMS[self._index % len(ITEMS)]
        self._index += 1
        return item

    def initial_messages(self, item: Any) -> list[dict[str, Any]]:
        now = datetime.datetime.now()
        system = f"Today is {now:%Y-%m-%d}, the time is {now:%H:%M}. Be brief."
        return [{"role": "system", "content": system},
                {"role": "user", "content": self.format_prompt(item)}]

    def format_prompt(self, item: dict[str, Any]) -> str:
        return item["question"]

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        answer = next((m.get("content") or "" for m in reversed(result.messages)
                       if m.get("role") == "assistant"), "")
        response = await self.server.chat_completion(
            messages=[{"role": "system", "content": "You grade answers. Reply 0-10."},
                      {"role": "user", "content": f"Q: {item['question']}\nA: {answer}"}],
            n=1, temperature=0.0, max_tokens=100)
        text = response.choices[0].message.content or ""
        return 1.0 if any(ch.isdigit() for ch in text) else 0.5

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    JudgeClockEnv.cli()
