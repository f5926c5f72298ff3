"""The source of the smallest Hermes env file a test can run: one item, one rollout of one
turn, reward 1.0 (a run that goes wrong ends fast). ``setup`` is the body of its ``setup``
(indented eight spaces), ``imports`` extra lines at the top."""

from __future__ import annotations


def tiny_env_source(setup: str = "        pass\n", imports: str = "") -> str:
    return f'''{imports}
from typing import Any

from environments._config import default_server_configs
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig


class TinyEnv(HermesAgentBaseEnv):
    name = "tiny"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls):
        return HermesAgentEnvConfig(enabled_toolsets=[], group_size=1, total_steps=1,
                                    max_agent_turns=1, eval_size=1,
                                    use_wandb=False), default_server_configs()

    async def setup(self) -> None:
{setup}
    async def get_next_item(self) -> str:
        return "2+2?"

    def format_prompt(self, item: str) -> str:
        return item

    async def compute_reward(self, item, result, ctx) -> float:
        return 1.0

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    TinyEnv.cli()
'''
