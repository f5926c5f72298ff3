"""An env that sends the ShareGPT role ``human`` (not ``user``) and swallows a failed request,
as community envs do with ``try: … except Exception: return None`` — every group comes back
empty, and the endpoint's 422 is the only trace of why."""

from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item


class HumanRoleEnv(BaseEnv):
    name = "human_role"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        return (BaseEnvConfig(tokenizer_name="gpt2", group_size=2, use_wandb=True,
                              max_token_length=512, total_steps=2, wandb_name="human_role"),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                 api_key="")])

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        self.iter += 1
        return (self.iter, 2)

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        try:
            await self.server.chat_completion(
                messages=[{"role": "human", "content": f"What is {item[0]} + {item[1]}?"}],
                n=self.config.group_size)
        except Exception:
            return None, []
        return None, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    HumanRoleEnv.cli()
