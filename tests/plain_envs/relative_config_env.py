"""An env that reads its settings from a file relative to the working folder, as Atropos's
letter_counting reads ``config.yaml``: run from another folder it loads another file, or none."""

import json
from pathlib import Path
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer


class RelativeConfigEnv(BaseEnv):
    name = "relative_config"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        return (BaseEnvConfig(tokenizer_name="gpt2", group_size=2, use_wandb=True,
                              max_token_length=512, total_steps=2, ensure_scores_are_not_same=False,
                              wandb_name="relative_config"),
                [APIServerConfig(model_name="m", base_url="http://localhost:9001/v1",
                                 api_key="")])

    async def setup(self):
        self.pairs = json.loads(Path("sums_config.json").read_text())["pairs"]
        self.iter = 0

    async def get_next_item(self) -> Item:
        pair = self.pairs[self.iter % len(self.pairs)]
        self.iter += 1
        return tuple(pair)

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        messages = [{"role": "user", "content": f"What is {item[0]} + {item[1]}?"}]
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            text = choice.message.content
            out = tokenize_for_trainer(self.tokenizer,
                                       messages + [{"role": "assistant", "content": text}])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.0 if f"\\boxed{{{sum(item)}}}" in text else 0.0)
        return group, []

    async def evaluate(self, *args, **kwargs):
        a, b = self.pairs[0]
        await self.server.chat_completion(
            messages=[{"role": "user", "content": f"What is {a} + {b}?"}], n=1, split="eval")


if __name__ == "__main__":
    RelativeConfigEnv.cli()
