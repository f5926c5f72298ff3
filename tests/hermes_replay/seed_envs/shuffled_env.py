"""An environment that shuffles its dataset with unseeded ``random`` (and numpy) in ``setup()``.

A pattern real Hermes environments use. Without seeding, every run asks its questions in a
different order, so a replay asks questions the cassette never recorded.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from environments._config import default_server_configs
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

QUESTIONS = [f"What is {n} plus {n * 3}?" for n in range(40)]


class ShuffledEnv(HermesAgentBaseEnv):
    name = "shuffled"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(enabled_toolsets=[], group_size=2, max_agent_turns=2,
                                      eval_size=2)
        return config, default_server_configs()

    async def setup(self) -> None:
        self._items = list(QUESTIONS)
        random.shuffle(self._items)  # unseeded, on purpose
        self._bonus = int(np.random.randint(0, 1000))  # numpy's global generator, unseeded
        self._index = 0

    async def get_next_item(self) -> str:
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: str) -> str:
        return f"{item} (ticket {self._bonus})"

    async def compute_reward(self, item: str, result: AgentResult, ctx: ToolContext) -> float:
        return 1.0 if result.finished_naturally else 0.0

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    ShuffledEnv.cli()
