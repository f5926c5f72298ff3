"""A six-turn Hermes env for the fork tests (issue 48): each turn's terminal call builds one file
of the sandbox, turn 4 decides what ``d.txt`` holds, and the reward reads ``d.txt`` there.

``TASK`` is what the tests edit (``"stamped steps"`` makes turn 2's command also print the
clock in nanoseconds: a tool whose re-run result drifts from its recording).
"""

from __future__ import annotations

from typing import Any

from environments._config import default_server_configs
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

TASK = "steps"
SCORES = {"four": 1.0, "FOUR": 0.5, "4": 0.25}


def score(d_txt: str) -> float:
    """The reward rule, also used by the tests to recompute rewards independently."""
    return SCORES.get(d_txt.strip(), 0.0)


class StepsEnv(HermesAgentBaseEnv):
    name = "fork-steps"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(enabled_toolsets=["terminal"], max_agent_turns=8,
                                      group_size=2, eval_size=1, tool_call_parser="hermes",
                                      system_prompt="You build files with a terminal.")
        return config, default_server_configs()

    async def setup(self) -> None:
        pass

    async def get_next_item(self) -> dict[str, Any]:
        return {"id": "build-files"}

    def format_prompt(self, item: dict[str, Any]) -> str:
        return f"Task {item['id']}: do the {TASK}, one file per turn."

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        run = await ctx.aterminal("cat d.txt")
        return score(run["output"])

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    StepsEnv.cli()
