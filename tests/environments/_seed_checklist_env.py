"""The seed's "minimal implementation checklist" environment, written the way the seed shows it.

Every method follows the seed's own snippets (setup with a dataset try / built-in fallback and
``max(20, 10%)`` eval split, cycling get_next_item, compute_reward walking ``reversed(messages)``
and calling an LLM judge, evaluate with ``HermesAgentLoop`` + ``ToolContext`` per item and
``evaluate_log``, wandb_log clearing its buffer before ``super()``). It deliberately does NOT
roll back its buffer during evaluate — the base class must do that.
"""

from __future__ import annotations

import json
import os
import random
import re

from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from pydantic import Field

from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

BUILTIN_SAMPLES = [
    {"question": f"What is notable about topic number {i}?", "keywords": ["topic", str(i)]}
    for i in range(30)
]


class MyEnvConfig(HermesAgentEnvConfig):
    judge_max_tokens: int = Field(default=128, description="Token limit of a judge reply.")


class MyEnv(HermesAgentBaseEnv):
    name = "my-env"
    env_config_cls = MyEnvConfig

    @classmethod
    def config_init(cls):
        env_config = MyEnvConfig(enabled_toolsets=["terminal"], max_agent_turns=4,
                                 group_size=4, eval_size=2)
        server_configs = [APIServerConfig(
            base_url=os.environ.get("MY_ENV_BASE_URL", ""),
            model_name=os.environ.get("MY_ENV_MODEL", "default"),
            server_type="openai",
            api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
            health_check=False,
        )]
        return env_config, server_configs

    async def setup(self) -> None:
        """Called once at start-up. Loads datasets, initialises state."""
        # Try HuggingFace, on error fall back to the built-in samples
        try:
            if os.environ.get("HF_HUB_OFFLINE"):
                raise RuntimeError("offline")
            from datasets import load_dataset

            ds = load_dataset("your/dataset", split="test")
            self._items = [dict(row) for row in ds]
        except Exception:
            self._items = list(BUILTIN_SAMPLES)

        # Always split into train/eval
        random.Random(0).shuffle(self._items)
        eval_size = max(20, int(len(self._items) * 0.1))
        self._eval_items = self._items[:eval_size]
        self._items = self._items[eval_size:]
        self._index = 0
        self._reward_buffer: list[float] = []

    async def get_next_item(self) -> dict:
        """Returns the next item, cycling through the dataset."""
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: dict) -> str:
        """Turns a dataset item into the user prompt."""
        return f"Research this question: {item['question']}"

    async def compute_reward(self, item, result: AgentResult, ctx: ToolContext) -> float:
        # Extract the final answer (the last assistant message with content)
        final_response = ""
        tools_used = []
        for msg in reversed(result.messages):
            if msg.get("role") == "assistant" and msg.get("content") and not final_response:
                final_response = msg["content"]
            if msg.get("role") == "assistant" and msg.get("tool_calls"):
                for tc in msg["tool_calls"]:
                    fn = tc.get("function", {}) if isinstance(tc, dict) else {}
                    name = fn.get("name", "")
                    if name:
                        tools_used.append(name)

        # Score with an LLM judge, a heuristic or ToolContext
        correctness = await self._llm_judge(item, final_response)
        self._reward_buffer.append(correctness)
        return correctness

    async def _llm_judge(self, item, answer: str) -> float:
        try:
            response = await self.server.chat_completion(
                messages=[{"role": "user", "content":
                           f"Score the answer 0-10 and reply as JSON {{\"score\": n}}.\n"
                           f"Question: {item['question']}\nAnswer: {answer}"}],
                n=1, temperature=0.0, max_tokens=self.config.judge_max_tokens)
            text = response.choices[0].message.content or ""
            score = float(json.loads(re.search(r"\{.*\}", text, re.S).group(0))["score"])
            return max(0.0, min(1.0, score / 10.0 if score > 1 else score))
        except Exception:
            # keyword overlap heuristic when the judge fails
            words = set(answer.lower().split())
            return sum(k in words for k in item["keywords"]) / len(item["keywords"])

    async def evaluate(self, *args, **kwargs) -> None:
        import time
        import uuid

        from environments.agent_loop import HermesAgentLoop
        from environments.tool_context import ToolContext

        start_time = time.time()
        tools, valid_names = self._resolve_tools_for_group()
        samples = []

        for item in self._eval_items[: self.config.eval_size]:
            task_id = str(uuid.uuid4())
            messages = []
            if self.config.system_prompt:
                messages.append({"role": "system", "content": self.config.system_prompt})
            messages.append({"role": "user", "content": self.format_prompt(item)})

            agent = HermesAgentLoop(
                server=self.server,
                tool_schemas=tools,
                valid_tool_names=valid_names,
                max_turns=self.config.max_agent_turns,
                task_id=task_id,
                temperature=0.0,  # deterministic for evaluation
                max_tokens=self.config.max_token_length,
                extra_body=self.config.extra_body,
            )
            result = await agent.run(messages)

            ctx = ToolContext(task_id)
            try:
                reward = await self.compute_reward(item, result, ctx)
            finally:
                ctx.cleanup()

            samples.append({"prompt": self.format_prompt(item),
                            "response": result.messages[-1].get("content"), "reward": reward})

        eval_metrics = {"eval/mean_reward": sum(s["reward"] for s in samples) / len(samples)}
        await self.evaluate_log(metrics=eval_metrics, samples=samples,
                                start_time=start_time, end_time=time.time())

    async def wandb_log(self, wandb_metrics=None):
        if wandb_metrics is None:
            wandb_metrics = {}
        if self._reward_buffer:
            n = len(self._reward_buffer)
            wandb_metrics["train/mean_reward"] = sum(self._reward_buffer) / n
            self._reward_buffer.clear()
        await super().wandb_log(wandb_metrics)  # MUST call super


if __name__ == "__main__":
    MyEnv.cli()
