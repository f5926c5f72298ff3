"""An environment whose ``score()`` drops every group: the length filter is tighter than any
reply (a real mistake: ``max_token_length`` set for the answer alone). atroposlib's ``process``
retries such a group forever; the harness must stop it with a message."""

from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


class TooStrictEnv(BaseEnv):
    name = "too_strict"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        return (BaseEnvConfig(tokenizer_name="gpt2", group_size=2, use_wandb=True,
                              max_token_length=8, total_steps=3),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1", api_key="")])

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        self.iter += 1
        return {"a": self.iter, "b": 2}

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        messages = [{"role": "user", "content": f"What is {item['a']} + {item['b']}?"}]
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            out = tokenize_for_trainer(
                self.tokenizer, messages + [{"role": "assistant",
                                             "content": choice.message.content}])
            if len(out["tokens"]) >= self.config.max_token_length:
                continue  # too long: dropped
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0)
        return (group if group["tokens"] else None), []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    TooStrictEnv.cli()
