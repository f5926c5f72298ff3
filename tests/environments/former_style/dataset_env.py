"""A dataset-driven environment written for the former Hermes layer (a test fixture, unmodified).

Rows come from Hugging Face ``datasets`` (``dataset_name``/``dataset_split``/``prompt_field``);
the default dataset is a folder next to this file, so it loads offline. The reward checks the
``ANSWER: n`` line against the row's answer and gives a little credit for using the terminal.
"""

import os
import random
import re
import time
from typing import Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, ScoredDataItem
from datasets import load_dataset

from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

HERE = os.path.dirname(os.path.abspath(__file__))


class DatasetEnv(HermesAgentBaseEnv):
    name = "arith-dataset"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> Tuple[HermesAgentEnvConfig, List[APIServerConfig]]:
        env_config = HermesAgentEnvConfig(
            dataset_name=os.path.join(HERE, "data", "arith"),
            dataset_split="train",
            prompt_field="question",
            enabled_toolsets=["terminal"],
            max_agent_turns=3,
            group_size=2,
            total_steps=2,
            use_wandb=False,
            wandb_name="arith-dataset",
        )
        return env_config, [APIServerConfig(base_url="http://localhost:8000/v1",
                                            model_name="NousResearch/Hermes-4-14B",
                                            server_type="openai", api_key="x",
                                            health_check=False)]

    async def setup(self):
        self.dataset = load_dataset(self.config.dataset_name, split=self.config.dataset_split)
        self.test = load_dataset(self.config.dataset_name, split="test")
        self.order = list(range(len(self.dataset)))
        random.Random(0).shuffle(self.order)
        self.iter = 0
        self.correct: List[float] = []

    async def get_next_item(self) -> Dict:
        row = self.dataset[self.order[self.iter % len(self.order)]]
        self.iter += 1
        return dict(row)

    def format_prompt(self, item: Dict) -> str:
        return f"Problem id: {item['id']}. {item[self.config.prompt_field]}"

    async def compute_reward(self, item: Dict, result: AgentResult, ctx: ToolContext) -> float:
        final = ""
        for msg in reversed(result.messages):
            if msg.get("role") == "assistant" and msg.get("content"):
                final = msg["content"]
                break
        found = re.search(r"ANSWER:\s*(-?\d+)", final)
        correct = bool(found) and found.group(1) == str(item["answer"])
        used_terminal = any(m.get("role") == "tool" for m in result.messages)
        self.correct.append(float(correct))
        return (0.8 if correct else 0.0) + (0.2 if used_terminal else 0.0)

    async def evaluate(self, *args, **kwargs):
        start = time.time()
        rollouts = []
        for row in self.test:
            item = dict(row)
            scored: Tuple[Optional[ScoredDataItem], list] = await self.collect_trajectory(item)
            rollouts.append(scored[0]["scores"] if scored[0] else 0.0)
        await self.evaluate_log(metrics={"eval/mean_score": sum(rollouts) / len(rollouts)},
                                samples=[{"score": s} for s in rollouts],
                                start_time=start, end_time=time.time())

    async def wandb_log(self, wandb_metrics: Optional[Dict] = None):
        wandb_metrics = wandb_metrics or {}
        if self.correct:
            wandb_metrics["train/accuracy"] = sum(self.correct) / len(self.correct)
            self.correct = []
        await super().wandb_log(wandb_metrics)


if __name__ == "__main__":
    DatasetEnv.cli()
