"""Arithmetic with one ``chat_completion(n=group_size)`` per group, shuffled before scoring.

In the shape of many Atropos envs (text_reversal, gsm8k-style servers): the completions are
put in ``rollout_group_data`` and ``random.shuffle``d before ``score()``, which returns its
entries in that shuffled order — so entry ``i`` of the returned ``ScoredDataGroup`` is usually
not choice ``i`` of the reply. ``--env.drop_wrong True`` also leaves every wrong answer out of
the group (a filter in ``score()``): the group comes back shorter than its size.
"""

import random
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from pydantic import Field


class ShuffleConfig(BaseEnvConfig):
    drop_wrong: bool = Field(False, description="leave wrong answers out of the group")


class ShufflingEnv(BaseEnv):
    name = "shuffling"
    env_config_cls = ShuffleConfig

    @classmethod
    def config_init(cls) -> Tuple[ShuffleConfig, List[APIServerConfig]]:
        return (ShuffleConfig(tokenizer_name="gpt2", group_size=4, use_wandb=True,
                              max_token_length=512, total_steps=3, wandb_name="shuffling",
                              ensure_scores_are_not_same=False),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                 api_key="")])

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        self.iter += 1
        return (self.iter * 7, self.iter + 3)

    def _messages(self, item):
        return [{"role": "user", "content": f"What is {item[0]} + {item[1]}?"}]

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        completion = await self.server.chat_completion(messages=self._messages(item),
                                                       n=self.config.group_size)
        rollout_group_data = []
        for choice in completion.choices:
            rollout_group_data.append(
                (self._messages(item) + [{"role": "assistant",
                                          "content": choice.message.content}], sum(item)))
        random.shuffle(rollout_group_data)
        return await self.score(rollout_group_data), []

    @staticmethod
    def reward(text: str, answer: int) -> float:
        return 1.0 if f"\\boxed{{{answer}}}" in text else 0.0

    async def score(self, rollout_group_data) -> Optional[ScoredDataGroup]:
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for messages, answer in rollout_group_data:
            reward = self.reward(messages[-1]["content"], answer)
            if self.config.drop_wrong and reward == 0.0:
                continue
            out = tokenize_for_trainer(self.tokenizer, messages)
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(reward)
        return group

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    ShufflingEnv.cli()
