"""Sums as plain text completion: ``self.server.completion(prompt=..., n=group_size)``.

The base-model style of Atropos environments: no chat template on the wire, one
``/v1/completions`` request per group, the prompt and each completion tokenized for the trainer
with only the completion trained on.
"""

import random
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item

PROMPT = "Question: What is {a} + {b}?\nWork it out, then write the result in \\boxed{{}}.\nAnswer:"


class SumCompletionEnv(BaseEnv):
    name = "sum_completion"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="NousResearch/Hermes-3-Llama-3.1-8B",
            group_size=8,
            use_wandb=True,
            max_token_length=256,
            total_steps=20,
            batch_size=32,
        )
        server_configs = [
            APIServerConfig(
                model_name="NousResearch/Hermes-3-Llama-3.1-8B",
                base_url="http://localhost:9001/v1",
                api_key="",
            ),
        ]
        return env_config, server_configs

    async def setup(self):
        rng = random.Random(99)
        self.items = [{"a": rng.randint(10, 90), "b": rng.randint(10, 90)} for _ in range(16)]
        self.iter = 0

    async def get_next_item(self) -> Item:
        item = self.items[self.iter % len(self.items)]
        self.iter += 1
        return item

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        prompt = PROMPT.format(**item)
        completions = await self.server.completion(
            prompt=prompt, n=self.config.group_size, max_tokens=64, temperature=1.0)
        prompt_tokens = self.tokenizer.encode(prompt, add_special_tokens=False)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completions.choices:
            answer_tokens = self.tokenizer.encode(choice.text, add_special_tokens=False)
            tokens = prompt_tokens + answer_tokens
            if len(tokens) > self.config.max_token_length:
                continue
            group["tokens"].append(tokens)
            group["masks"].append([-100] * len(prompt_tokens) + answer_tokens)
            group["scores"].append(self.score_text(choice.text, item["a"] + item["b"]))
        if not group["tokens"]:
            return None, []
        return group, []

    def score_text(self, text: str, answer: int) -> float:
        return 1.0 if f"\\boxed{{{answer}}}" in text else -1.0

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    SumCompletionEnv.cli()
