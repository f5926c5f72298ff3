"""Sums whose items carry a fresh ``uuid4()`` and a timestamp, as many community envs' do.

Each item gets a new id and creation time every run (a "round" record); neither reaches the
model. Recorded once and replayed, the rollouts must still be found: the item's identity may not
depend on values that are new in every run.
"""

import random
import uuid
from datetime import datetime, timezone
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


class UuidItemsEnv(BaseEnv):
    name = "uuid_items"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                                   group_size=4, use_wandb=True, max_token_length=512,
                                   total_steps=10, wandb_name="uuid_items")
        return env_config, [APIServerConfig(model_name="hermes", api_key="",
                                            base_url="http://localhost:9001/v1")]

    async def setup(self):
        rng = random.Random(7)
        self.rounds = [{"a": rng.randint(2, 60), "b": rng.randint(2, 60)} for _ in range(8)]
        self.iter = 0

    async def get_next_item(self) -> Item:
        round_ = dict(self.rounds[self.iter % len(self.rounds)])
        self.iter += 1
        round_["round_id"] = str(uuid.uuid4())
        round_["created"] = datetime.now(timezone.utc).isoformat()
        return round_

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        messages = [{"role": "user", "content": f"What is {item['a']} + {item['b']}?"}]
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            text = choice.message.content or ""
            out = tokenize_for_trainer(self.tokenizer,
                                       messages + [{"role": "assistant", "content": text}])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0 if f"\\boxed{{{item['a'] + item['b']}}}" in text
                                   else 0.0)
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    UuidItemsEnv.cli()
