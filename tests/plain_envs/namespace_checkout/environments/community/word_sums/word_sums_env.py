"""Sums asked in words, one chat request per group: a community env in a namespace package.

Run from the repository root as ``python -m environments.community.word_sums.word_sums_env
process``: ``environments/`` has no ``__init__.py`` and the scoring helpers are imported
relatively, so the file cannot run as a plain script.
"""

import random
from typing import Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

from .scoring import boxed_reward


class WordSumsEnv(BaseEnv):
    name = "word_sums"

    def __init__(self, config: BaseEnvConfig, server_configs: List[APIServerConfig],
                 slurm=True, testing=False):
        super().__init__(config, server_configs, slurm, testing)
        self.rewards_buffer = list()

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
            group_size=4, use_wandb=True, rollout_server_url="http://localhost:8000",
            total_steps=10, batch_size=8, steps_per_eval=50, max_token_length=512,
            wandb_name="word_sums",
        )
        return env_config, [APIServerConfig(
            model_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
            base_url="http://localhost:9001/v1", api_key="", num_requests_for_eval=4)]

    async def setup(self):
        rng = random.Random(99)
        self.train = [(rng.randint(2, 60), rng.randint(2, 60)) for _ in range(16)]
        self.iter = 0

    async def get_next_item(self) -> Item:
        a, b = self.train[self.iter % len(self.train)]
        self.iter += 1
        return (a, b)

    def _messages(self, item) -> List[Dict[str, str]]:
        a, b = item
        return [{"role": "user", "content": f"What is {a} + {b}? Answer in \\boxed{{}}."}]

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        completions = await self.server.chat_completion(
            messages=self._messages(item), n=self.config.group_size,
            max_tokens=self.config.max_token_length)
        group = ScoredDataGroup(tokens=[], masks=[], scores=[])
        for choice in completions.choices:
            messages = self._messages(item) + [
                {"role": "assistant", "content": choice.message.content}]
            out = tokenize_for_trainer(self.tokenizer, messages, choice.finish_reason)
            reward = boxed_reward(choice.message.content, item[0] + item[1])
            group["tokens"].append(out["tokens"])
            group["masks"].append(out["masks"])
            group["scores"].append(reward)
            self.rewards_buffer.append(reward)
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    WordSumsEnv.cli()
