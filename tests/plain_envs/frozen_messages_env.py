"""Sums whose prompts are frozen message dicts, rewarded in GRPO's range (−0.5 … 1.1).

Community environments make their items hashable by freezing each message:
``tuple(frozenset(m.items()) for m in messages)``. A frozenset's iteration order follows the
strings' hashes, which change with ``PYTHONHASHSEED``: the item's identity must not. Rewards
are −0.5 for a wrong answer and 1.1 for a right one (a length bonus), which a trainer takes
as they are.
"""

import random
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

SYSTEM = "You are a careful calculator. Give the final answer in \\boxed{}."


class FrozenMessagesEnv(BaseEnv):
    name = "frozen_messages"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                                   group_size=4, use_wandb=True, max_token_length=512,
                                   total_steps=10, wandb_name="frozen_messages")
        return env_config, [APIServerConfig(model_name="hermes", api_key="",
                                            base_url="http://localhost:9001/v1")]

    async def setup(self):
        rng = random.Random(11)
        self.train = []
        for _ in range(8):
            a, b = rng.randint(2, 60), rng.randint(2, 60)
            prompt = (frozenset({"role": "system", "content": SYSTEM}.items()),
                      frozenset({"role": "user", "content": f"What is {a} + {b}?"}.items()))
            tags = frozenset({"arithmetic", "addition", "two-operands", f"sum-{a + b}"})
            self.train.append((prompt, a + b, tags))
        self.iter = 0

    async def get_next_item(self) -> Item:
        item = self.train[self.iter % len(self.train)]
        self.iter += 1
        return item

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        prompt, answer, _tags = item
        messages = [dict(role_content) for role_content in prompt]
        completion = await self.server.chat_completion(messages=messages,
                                                       n=self.config.group_size)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completion.choices:
            text = choice.message.content or ""
            out = tokenize_for_trainer(self.tokenizer,
                                       messages + [{"role": "assistant", "content": text}])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(1.1 if f"\\boxed{{{answer}}}" in text else -0.5)
        return group, []

    async def evaluate(self, *args, **kwargs):
        correct = []
        for prompt, answer, _tags in self.train[:2]:
            completion = await self.server.chat_completion(
                messages=[dict(m) for m in prompt], n=1, temperature=0.0, split="eval")
            correct.append(f"\\boxed{{{answer}}}" in (completion.choices[0].message.content or ""))
        await self.wandb_log({"eval/percent_correct": sum(correct) / len(correct)})


if __name__ == "__main__":
    FrozenMessagesEnv.cli()
