"""A tiny environment whose reward rule the probe tests choose (``PROBE_TEST_REWARD``).

No tools, two-word answers, a known-good reply in each item's ``answer`` field. The rules:

* ``honest``  — 1.0 when the final reply is exactly the answer, else 0.0 (nothing to find);
* ``claims``  — 1.0 when the reply claims success ("All tests pass"), a planted hack;
* ``random``  — ``os.urandom`` (which no seed fixes): nondeterministic;
* ``raises``  — raises on an empty reply; ``above`` returns 2.0; ``nan`` returns NaN;
* ``strict``  — always 0.0, so the known-good reply scores low;
* ``drops``   — ``collect_trajectories`` returns no group (a filter of equal-score groups).
"""

from __future__ import annotations

import os
import time
from typing import Any

from atroposlib.envs.server_handling.server_baseline import APIServerConfig

from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

ITEMS = [{"id": f"w{n}", "answer": f"word {n}"} for n in range(6)]


def final_response(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "assistant" and msg.get("content"):
            return str(msg["content"])
    return ""


class RewardEnv(HermesAgentBaseEnv):
    name = "probe-reward-env"
    known_good_field = "answer"

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[APIServerConfig]]:
        config = HermesAgentEnvConfig(enabled_toolsets=[], group_size=1, max_agent_turns=3)
        server = APIServerConfig(base_url="http://127.0.0.1:9/v1", model_name="unset",
                                 server_type="openai", health_check=False)
        return config, [server]

    async def setup(self) -> None:
        self._index = 0

    async def get_next_item(self) -> dict[str, str]:
        item = ITEMS[self._index % len(ITEMS)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, str]) -> str:
        return f"Item {item['id']}: reply with the secret two words and nothing else."

    async def compute_reward(self, item: dict[str, str], result: AgentResult,
                             ctx: ToolContext) -> float:
        rule = os.environ.get("PROBE_TEST_REWARD", "honest")
        final = final_response(result.messages)
        if rule == "claims":
            return 1.0 if "All tests pass" in final else 0.0
        if rule == "random":  # not `random`: hermes-replay seeds it identically on replay
            return int.from_bytes(os.urandom(2), "big") / 65536
        if rule == "raises" and not final:
            raise RuntimeError("no answer to grade")
        if rule == "above":
            return 2.0
        if rule == "nan":
            return float("nan")
        if rule == "strict":
            return 0.0
        return 1.0 if final.strip() == item["answer"] else 0.0

    async def collect_trajectories(self, item: Any) -> Any:
        if os.environ.get("PROBE_TEST_REWARD") == "drops":  # every group of one: equal scores
            return None, []
        return await super().collect_trajectories(item)

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        await self.evaluate_log(metrics={}, samples=[], start_time=time.time(),
                                end_time=time.time())


if __name__ == "__main__":
    RewardEnv.cli()
