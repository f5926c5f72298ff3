"""Two-turn conversations for a whole group inside ``collect_trajectories``: each of the
``group_size`` conversations asks, gets a reply, asks again with its own history, gets a second
reply — all at once (``asyncio.gather``), one ``chat_completion(n=1)`` per turn, so the group's
traffic interleaves every conversation's turns. ``score()`` shuffles the conversations."""

import asyncio
import random
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


class MultiTurnGroupEnv(BaseEnv):
    name = "multiturn_group"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        return (BaseEnvConfig(tokenizer_name="gpt2", group_size=3, use_wandb=True,
                              max_token_length=1024, total_steps=2,
                              ensure_scores_are_not_same=False, wandb_name="multiturn"),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                 api_key="")])

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        self.iter += 1
        return (self.iter * 5, self.iter + 1)

    async def _conversation(self, item):
        messages = [{"role": "user", "content": f"What is {item[0]} + {item[1]}?"}]
        for _ in range(2):
            completion = await self.server.chat_completion(messages=messages, n=1)
            messages.append({"role": "assistant",
                             "content": completion.choices[0].message.content})
            messages.append({"role": "user",
                             "content": f"Check it once more: what is {item[0]} + {item[1]}?"})
        return messages[:-1]

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        conversations = await asyncio.gather(
            *[self._conversation(item) for _ in range(self.config.group_size)])
        conversations = list(conversations)
        random.shuffle(conversations)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for messages in conversations:
            out = tokenize_for_trainer(self.tokenizer, messages)
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0 if f"\\boxed{{{sum(item)}}}" in messages[-1]["content"]
                                   else 0.0)
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    MultiTurnGroupEnv.cli()
