"""An environment that imports a module drawing from ``random`` at import time, then shuffles
its dataset with unseeded ``random`` in ``setup()`` (issue 25, item 11)."""

from __future__ import annotations

import random
from typing import Any

import draws_at_import  # noqa: F401  (imported for its import-time draw)

from environments._config import default_server_configs
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

QUESTIONS = [f"What is {n} times {n + 7}?" for n in range(40)]


class ImportDrawEnv(HermesAgentBaseEnv):
    name = "import_draw"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(enabled_toolsets=[], group_size=2, max_agent_turns=2,
                                      eval_size=2)
        return config, default_server_configs()

    async def setup(self) -> None:
        # unseeded, on purpose. The ticket is drawn first: ``random()`` takes two words of
        # the generator and rejects none, so a draw made elsewhere always changes it (a
        # ``shuffle`` alone can absorb one extra word when its rejection sampling skips it,
        # which hid the bug in about a third of the seeds)
        self._ticket = random.random()
        self._items = list(QUESTIONS)
        random.shuffle(self._items)
        self._index = 0

    async def get_next_item(self) -> str:
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: str) -> str:
        return f"{item} (ticket {self._ticket:.6f})"

    async def compute_reward(self, item: str, result: AgentResult, ctx: ToolContext) -> float:
        return 1.0 if result.finished_naturally else 0.0

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    ImportDrawEnv.cli()
