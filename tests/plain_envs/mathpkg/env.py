"""Sums with token-level data from ``tokens_and_logprobs_completion`` (vLLM/SGLang ``/generate``).

Lives in a package with its helpers and imports them relatively, so it runs as a module:
``python -m mathpkg.env process …``.
"""

from typing import List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item

from .grading import grade

QUESTIONS = [(12, 30), (7, 8), (41, 19), (25, 25), (3, 66)]


class PackagedMathEnv(BaseEnv):
    name = "packaged_math"

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="Qwen/Qwen3-1.7B",
            group_size=4,
            use_wandb=True,
            max_token_length=512,
            total_steps=10,
        )
        server_configs = [
            APIServerConfig(
                model_name="Qwen/Qwen3-1.7B",
                base_url="http://localhost:9001/v1",
                server_type="vllm",
                tokenizer_name="Qwen/Qwen3-1.7B",
            ),
        ]
        return env_config, server_configs

    async def setup(self):
        self.iter = 0

    async def get_next_item(self) -> Item:
        item = QUESTIONS[self.iter % len(QUESTIONS)]
        self.iter += 1
        return item

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        a, b = item
        prompt = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": f"What is {a} + {b}? Answer in \\boxed{{}}."}],
            tokenize=False, add_generation_prompt=True)
        prompt_tokens, outputs, logprobs, finish_reasons = (
            await self.server.tokens_and_logprobs_completion(
                prompt=prompt, n=self.config.group_size, max_tokens=64, temperature=1.0))
        group = ScoredDataGroup(tokens=[], masks=[], scores=[], inference_logprobs=[])
        for output, output_logprobs in zip(outputs, logprobs):
            text = self.tokenizer.decode(output)
            group["tokens"].append(list(prompt_tokens) + list(output))
            group["masks"].append([-100] * len(prompt_tokens) + list(output))
            group["inference_logprobs"].append([1.0] * len(prompt_tokens) + list(output_logprobs))
            group["scores"].append(grade(text, a + b))
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    PackagedMathEnv.cli()
