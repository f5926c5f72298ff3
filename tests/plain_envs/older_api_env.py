"""Sums written for an older atroposlib: ``collect_trajectories`` hands back unscored tuples.

Earlier atroposlib releases let an env return ``(messages, finish_reason)`` pairs and score them
later; 0.4.0 takes a ``ScoredDataGroup`` (or a list of them, or None) and a backlog, and fails
in ``handle_send_to_api`` with ``'tuple' object has no attribute 'get'`` on anything else.
"""

from typing import List, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig
from atroposlib.type_definitions import Item


class OlderApiEnv(BaseEnv):
    name = "older_api"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                                   group_size=2, use_wandb=True, max_token_length=512,
                                   total_steps=4, wandb_name="older_api")
        return env_config, [APIServerConfig(model_name="hermes", api_key="",
                                            base_url="http://localhost:9001/v1")]

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        self.iter += 1
        return (self.iter, self.iter + 1)

    async def collect_trajectories(self, item):
        a, b = item
        messages = ({"role": "user", "content": f"What is {a} + {b}?"},)
        completion = await self.server.chat_completion(messages=list(messages),
                                                       n=self.config.group_size)
        to_score = [(messages + ({"role": "assistant", "content": c.message.content},),
                     c.finish_reason) for c in completion.choices]
        return to_score, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    OlderApiEnv.cli()
