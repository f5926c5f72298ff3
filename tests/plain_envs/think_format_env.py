"""Word problems scored like many community reasoning envs: format first, then correctness.

The reply must reason inside ``<think>…</think>`` and give a ``\\boxed{}`` answer: 0.5 for the
format, 1.0 when the boxed answer is also right, 0 otherwise. ``score()`` returns None for a
group whose rollouts all scored the same (no signal for GRPO), as the community envs do. The
scripted stand-in knows nothing of this env: its generic replies must still differ in shape
within a group, or every group is dropped.
"""

import re
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

PROBLEMS = [("Tom has 17 apples and buys 25 more. How many apples does he have now?", 42),
            ("A shelf holds 12 books and another holds 30. How many books are there?", 42),
            ("Sara ran 8 km on Monday and 13 km on Tuesday. How far did she run?", 21)]
BOXED = re.compile(r"\\boxed\{([^}]*)\}")


class ThinkFormatEnv(BaseEnv):
    name = "think_format"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                                   group_size=4, use_wandb=True, max_token_length=1024,
                                   total_steps=10, wandb_name="think_format")
        return env_config, [APIServerConfig(model_name="hermes", api_key="",
                                            base_url="http://localhost:9001/v1")]

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        item = PROBLEMS[self.iter % len(PROBLEMS)]
        self.iter += 1
        return item

    def reward(self, text: str, answer: int) -> float:
        if "<think>" not in text or "</think>" not in text:
            return 0.0
        found = BOXED.search(text.split("</think>", 1)[1])
        if found is None:
            return 0.0
        return 1.0 if found.group(1).strip() == str(answer) else 0.5

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        question, answer = item
        messages = [{"role": "user", "content": question}]
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            text = choice.message.content or ""
            out = tokenize_for_trainer(self.tokenizer,
                                       messages + [{"role": "assistant", "content": text}])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(self.reward(text, answer))
        if len(set(group["scores"])) == 1:
            return None, []
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    ThinkFormatEnv.cli()
