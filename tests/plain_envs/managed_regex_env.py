"""Regex strings through ``managed_server``: token ids, masks and logprobs from the server.

atroposlib 0.4's recommended pattern for token-level training data: inside
``async with self.server.managed_server(tokenizer=self.tokenizer) as managed`` one
``chat_completion(n=group_size)`` is sent to the inference server's ``/generate``; the managed
state holds each sample's full token sequence, its masks and logprobs.
"""

import re
from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item

PATTERNS = [r"^[a-z]+[0-9]+$", r"^h[a-z]+o$", r"^[a-z]+[0-9]{3}$", r"^he.*$"]
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


class RegexManagedEnv(BaseEnv):
    name = "regex_managed"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="Qwen/Qwen3-1.7B",
            group_size=4,
            use_wandb=True,
            max_token_length=1024,
            total_steps=10,
            batch_size=16,
        )
        server_configs = [
            APIServerConfig(
                model_name="Qwen/Qwen3-1.7B",
                base_url="http://localhost:9001/v1",
                api_key="x",
                server_type="vllm",
            ),
        ]
        return env_config, server_configs

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        pattern = PATTERNS[self.iter % len(PATTERNS)]
        self.iter += 1
        return {"pattern": pattern}

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        messages = [{"role": "user", "content": "Write one string that matches the regular "
                     f"expression {item['pattern']} and put it in <answer></answer> tags."}]
        async with self.server.managed_server(tokenizer=self.tokenizer) as managed:
            completion = await managed.chat_completion(
                messages=messages, n=self.config.group_size, max_tokens=128, temperature=1.0)
            state = managed.get_state()
        nodes = state["nodes"]
        group = ScoredDataGroup(tokens=[], masks=[], scores=[], inference_logprobs=[])
        for choice, node in zip(completion.choices, nodes):
            group["tokens"].append(node.tokens)
            group["masks"].append(node.masked_tokens)
            group["inference_logprobs"].append(node.logprobs)
            group["scores"].append(self.reward(choice.message.content or "", item["pattern"]))
        return group, []

    def reward(self, text: str, pattern: str) -> float:
        found = ANSWER.search(text)
        return 1.0 if found and re.fullmatch(pattern, found.group(1).strip()) else 0.0

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    RegexManagedEnv.cli()
