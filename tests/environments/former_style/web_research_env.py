"""A web research environment written for the former Hermes layer (a test fixture, unmodified).

Toolsets come from the ``research`` distribution (web search and extract, sometimes files and a
todo list), drawn once per group. An LLM judge scores the answer against a reference; when the
judge's reply does not parse, keyword overlap is the reward.
"""

import json
import re
import time
from typing import Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig
from pydantic import Field

from environments.agent_loop import AgentResult, HermesAgentLoop
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

QUESTIONS = [
    {"question": "Why is the sky blue?", "reference": "Rayleigh scattering of sunlight by air "
     "molecules scatters blue light most.", "keywords": ["scattering", "sunlight", "blue"]},
    {"question": "What causes the seasons?", "reference": "The tilt of Earth's axis changes "
     "the angle of sunlight.", "keywords": ["tilt", "axis", "sunlight"]},
    {"question": "Why is the sky blue during the day?", "reference": "Air molecules scatter "
     "short blue wavelengths of sunlight.", "keywords": ["molecules", "scatter", "blue"]},
]
JUDGE = ("You are a strict grader. Compare the answer with the reference answer and reply only "
         'with JSON: {"score": <0-10>, "reason": "..."}')


class WebResearchEnvConfig(HermesAgentEnvConfig):
    judge_max_tokens: int = Field(default=200, description="Judge reply limit.")


class WebResearchEnv(HermesAgentBaseEnv):
    name = "web-research"
    env_config_cls = WebResearchEnvConfig

    @classmethod
    def config_init(cls) -> Tuple[WebResearchEnvConfig, List[APIServerConfig]]:
        env_config = WebResearchEnvConfig(
            distribution="research",
            max_agent_turns=4,
            group_size=2,
            total_steps=2,
            eval_size=2,
            terminal_backend="local",
            default_result_size_chars=20_000,
            tool_result_overrides={"web_extract": 50_000},
            use_wandb=False,
            wandb_name="web-research",
        )
        return env_config, [APIServerConfig(base_url="https://openrouter.ai/api/v1",
                                            model_name="openai/gpt-4o-mini",
                                            server_type="openai", api_key="none",
                                            health_check=False)]

    async def setup(self):
        self.items = QUESTIONS[:2]
        self.eval_items = QUESTIONS[2:]
        self.i = 0
        self.judge_scores: List[float] = []

    async def get_next_item(self):
        item = self.items[self.i % len(self.items)]
        self.i += 1
        return item

    def format_prompt(self, item: Dict) -> str:
        return f"Search the web, then answer: {item['question']}"

    async def judge(self, item: Dict, answer: str) -> Optional[float]:
        response = await self.server.chat_completion(
            messages=[{"role": "system", "content": JUDGE},
                      {"role": "user", "content": f"Question: {item['question']}\n"
                       f"Reference answer: {item['reference']}\nAnswer to grade: {answer}"}],
            n=1, temperature=0.0, max_tokens=self.config.judge_max_tokens)
        text = response.choices[0].message.content or ""
        match = re.search(r"\{.*\}", text, re.DOTALL)
        if not match:
            return None
        try:
            return max(0.0, min(1.0, float(json.loads(match.group(0))["score"]) / 10.0))
        except (ValueError, KeyError, TypeError):
            return None

    async def compute_reward(self, item: Dict, result: AgentResult, ctx: ToolContext) -> float:
        answer = ""
        for msg in reversed(result.messages):
            if msg.get("role") == "assistant" and msg.get("content"):
                answer = msg["content"]
                break
        if not answer:
            return 0.0
        score = await self.judge(item, answer)
        if score is None:
            words = set(re.findall(r"[a-z]+", answer.lower()))
            score = sum(k in words for k in item["keywords"]) / len(item["keywords"])
        self.judge_scores.append(score)
        return score

    async def evaluate(self, *args, **kwargs):
        start = time.time()
        samples = []
        for item in self.eval_items:
            tools, names = self._resolve_tools_for_group()
            agent = HermesAgentLoop(server=self.server, tool_schemas=tools,
                                    valid_tool_names=names, max_turns=self.config.max_agent_turns,
                                    temperature=0.0,
                                    budget_config=self.config.build_budget_config())
            messages = [{"role": "user", "content": self.format_prompt(item)}]
            result = await agent.run(messages)
            ctx = ToolContext(agent.task_id)
            try:
                reward = await self.compute_reward(item, result, ctx)
            finally:
                ctx.cleanup()
            samples.append({"question": item["question"], "reward": reward})
        await self.evaluate_log(
            metrics={"eval/mean_reward": sum(s["reward"] for s in samples) / len(samples)},
            samples=samples, start_time=start, end_time=time.time())

    async def wandb_log(self, wandb_metrics: Optional[Dict] = None):
        wandb_metrics = wandb_metrics or {}
        if self.judge_scores:
            wandb_metrics["train/judge_mean"] = sum(self.judge_scores) / len(self.judge_scores)
            self.judge_scores = []
        await super().wandb_log(wandb_metrics)


if __name__ == "__main__":
    WebResearchEnv.cli()
