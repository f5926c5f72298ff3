"""Arithmetic scored in a process pool of the env's own, made in ``setup``.

Community envs (math_server_zero and others) grade in a ``ProcessPoolExecutor`` so a slow or
hanging grader cannot stall the event loop. Such an env must replay under the main job's
``-j`` workers as it runs under its own ``python -m … process``: a daemonic worker may not
start children (issue 45, item 2).
"""

import os
import random
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup
from atroposlib.type_definitions import Item
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

system_prompt = (
    "You are a careful calculator. Think briefly, then give the final answer in \\boxed{}."
)


def grade(text: str, answer: int) -> tuple[float, int]:
    """The rule, run in the pool's child process; its pid proves a child really graded it."""
    return (1.0 if f"\\boxed{{{answer}}}" in text else 0.0), os.getpid()


class ProcessPoolEnv(BaseEnv):
    name = "process_pool"

    def __init__(self, config: BaseEnvConfig, server_configs: List[APIServerConfig],
                 slurm=True, testing=False):
        super().__init__(config, server_configs, slurm, testing)
        self.percent_correct_buffer = list()
        self.eval_metrics = list()

    @classmethod
    def config_init(cls) -> Tuple[BaseEnvConfig, List[APIServerConfig]]:
        env_config = BaseEnvConfig(
            tokenizer_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
            group_size=4,
            use_wandb=True,
            rollout_server_url="http://localhost:8000",
            total_steps=100,
            batch_size=16,
            steps_per_eval=50,
            max_token_length=512,
            wandb_name="process_pool",
        )
        server_configs = [
            APIServerConfig(
                model_name="NousResearch/DeepHermes-3-Llama-3-3B-Preview",
                base_url="http://localhost:9001/v1",
                api_key="",
                num_requests_for_eval=16,
            ),
        ]
        return env_config, server_configs

    async def setup(self):
        self.pool = ProcessPoolExecutor(max_workers=1)
        rng = random.Random(1234)
        self.train = [(rng.randint(2, 60), rng.randint(2, 60)) for _ in range(32)]
        self.test = [(rng.randint(2, 60), rng.randint(2, 60)) for _ in range(4)]
        self.iter = 0

    async def get_next_item(self) -> Item:
        a, b = self.train[self.iter % len(self.train)]
        self.iter += 1
        return (a, b)

    def _messages(self, item) -> List[Dict[str, str]]:
        a, b = item
        return [{"role": "system", "content": system_prompt},
                {"role": "user", "content": f"What is {a} + {b}?"}]

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List[Item]]:
        chat_completions = await self.server.chat_completion(
            messages=self._messages(item),
            n=self.config.group_size,
            max_tokens=self.config.max_token_length,
        )
        to_score = []
        for choice in chat_completions.choices:
            messages = self._messages(item) + [
                {"role": "assistant", "content": choice.message.content}]
            to_score.append({"messages": messages, "answer": sum(item),
                             "finish_reason": choice.finish_reason})
        return await self.score(to_score), []

    def reward(self, text: str, answer: int) -> float:
        score, pid = self.pool.submit(grade, text, answer).result()
        assert pid != os.getpid(), "the pool graded in the env's own process"
        return score

    async def score(self, rollout_group_data) -> Optional[ScoredDataGroup]:
        scores = ScoredDataGroup()
        scores["tokens"] = list()
        scores["masks"] = list()
        scores["scores"] = list()
        for item in rollout_group_data:
            out = tokenize_for_trainer(self.tokenizer, item["messages"], item["finish_reason"])
            if len([1 for m in out["masks"] if m != -100]) < 5:
                continue
            reward = self.reward(item["messages"][-1]["content"], item["answer"])
            scores["tokens"].append(out["tokens"])
            scores["masks"].append(out["masks"])
            scores["scores"].append(reward)
            self.percent_correct_buffer.append(reward)
        if not scores["tokens"]:
            return None
        if self.config.group_size > 1 and len(set(scores["scores"])) == 1:
            return None  # no signal in a group that scored all the same
        return scores

    async def evaluate(self, *args, **kwargs):
        correct = []
        for item in self.test:
            completion = await self.server.chat_completion(
                messages=self._messages(item), n=1, temperature=0.0, split="eval")
            correct.append(self.reward(completion.choices[0].message.content, sum(item)))
        self.eval_metrics.append(("eval/percent_correct", sum(correct) / len(correct)))

    async def wandb_log(self, wandb_metrics: Optional[Dict] = None):
        if wandb_metrics is None:
            wandb_metrics = {}
        if self.percent_correct_buffer:
            wandb_metrics["train/percent_correct"] = (
                sum(self.percent_correct_buffer) / len(self.percent_correct_buffer))
        self.percent_correct_buffer = list()
        for key, value in self.eval_metrics:
            wandb_metrics[key] = value
        self.eval_metrics = list()
        await super().wandb_log(wandb_metrics)


if __name__ == "__main__":
    ProcessPoolEnv.cli()
