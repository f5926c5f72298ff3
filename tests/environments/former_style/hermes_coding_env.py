"""A coding environment written for the former Hermes layer (kept unmodified as a test fixture).

The agent writes ``solution.py``; the reward uploads hidden tests into the sandbox and runs them
with the terminal. Like the former examples, its config defaults to ``terminal_backend="modal"``
(cloud sandboxes), so on a machine without them it runs with ``--env.terminal_backend local``.
"""

import os
import tempfile
import time
import uuid
from typing import Dict, List, Optional, Tuple

from atroposlib.envs.base import APIServerConfig, EvalHandlingEnum, ScoredDataGroup
from pydantic import Field

from environments.agent_loop import AgentResult, HermesAgentLoop
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_call_parsers import get_parser
from environments.tool_context import ToolContext

TASKS = [
    {"id": "add", "prompt": "Coding task add: write solution.py with add(a, b) returning a + b.",
     "tests": "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
    {"id": "reverse_string",
     "prompt": "Coding task reverse_string: write solution.py with reverse_string(s).",
     "tests": "from solution import reverse_string\n\ndef test_rev():\n"
              "    assert reverse_string('abc') == 'cba'\n"},
    {"id": "factorial",
     "prompt": "Coding task factorial: write solution.py with factorial(n).",
     "tests": "from solution import factorial\n\ndef test_fact():\n"
              "    assert factorial(5) == 120\n"},
    {"id": "max_of_list",
     "prompt": "Coding task max_of_list: write solution.py with max_of_list(xs).",
     "tests": "from solution import max_of_list\n\ndef test_max():\n"
              "    assert max_of_list([3, 9, 2]) == 9\n"},
]


class HermesCodingEnvConfig(HermesAgentEnvConfig):
    test_timeout: int = Field(default=60, description="Seconds for the hidden tests.")


class HermesCodingEnv(HermesAgentBaseEnv):
    name = "hermes-coding"
    env_config_cls = HermesCodingEnvConfig

    @classmethod
    def config_init(cls) -> Tuple[HermesCodingEnvConfig, List[APIServerConfig]]:
        env_config = HermesCodingEnvConfig(
            enabled_toolsets=["terminal", "file"],
            disabled_toolsets=["browser"],
            terminal_backend="modal",
            terminal_timeout=60,
            max_agent_turns=4,
            group_size=2,
            total_steps=2,
            agent_temperature=1.0,
            system_prompt="You are a careful Python engineer.",
            tool_call_parser="hermes",
            eval_handling=EvalHandlingEnum.LIMIT_TRAIN,
            steps_per_eval=100,
            use_wandb=False,
            wandb_name="hermes-coding",
        )
        server_configs = [
            APIServerConfig(
                base_url="https://openrouter.ai/api/v1",
                model_name="anthropic/claude-sonnet-4",
                server_type="openai",
                api_key=os.getenv("OPENROUTER_API_KEY", "none"),
                health_check=False,
            )
        ]
        return env_config, server_configs

    async def setup(self):
        self.train = TASKS[:3]
        self.eval_tasks = TASKS[3:]
        self.iter = 0
        self.percent_correct_buffer: List[float] = []
        get_parser(self.config.tool_call_parser)  # fail early on a bad parser name

    async def get_next_item(self) -> Dict:
        item = self.train[self.iter % len(self.train)]
        self.iter += 1
        return item

    def format_prompt(self, item: Dict) -> str:
        return item["prompt"]

    async def compute_reward(self, item: Dict, result: AgentResult, ctx: ToolContext) -> float:
        solution = ctx.read_file("solution.py")
        if not solution.get("content"):
            self.percent_correct_buffer.append(0.0)
            return 0.0
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "test_hidden.py")
            with open(local, "w") as fh:
                fh.write(item["tests"])
            uploaded = ctx.upload_file(local, "test_hidden.py")
            if uploaded["exit_code"] != 0:
                return 0.0
        run = ctx.terminal("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q "
                           "-p no:cacheprovider test_hidden.py", timeout=self.config.test_timeout)
        reward = 1.0 if run["exit_code"] == 0 else 0.0
        self.percent_correct_buffer.append(reward)
        return reward

    async def evaluate(self, *args, **kwargs):
        start = time.time()
        tool_schemas, valid_names = self._resolve_tools_for_group()
        samples, rewards = [], []
        for item in self.eval_tasks:
            task_id = str(uuid.uuid4())
            messages = [{"role": "system", "content": self.config.system_prompt},
                        {"role": "user", "content": self.format_prompt(item)}]
            agent = HermesAgentLoop(
                server=self.server, tool_schemas=tool_schemas, valid_tool_names=valid_names,
                max_turns=self.config.max_agent_turns, task_id=task_id, temperature=0.0,
                max_tokens=self.config.max_token_length, extra_body=self.config.extra_body,
                budget_config=self.config.build_budget_config())
            result = await agent.run(messages)
            ctx = ToolContext(task_id)
            try:
                reward = await self.compute_reward(item, result, ctx)
            finally:
                ctx.cleanup()
            rewards.append(reward)
            samples.append({"id": item["id"], "reward": reward, "turns": result.turns_used,
                            "messages": result.messages})
        await self.evaluate_log(metrics={"eval/percent_correct": sum(rewards) / len(rewards)},
                                samples=samples, start_time=start, end_time=time.time())

    async def wandb_log(self, wandb_metrics: Optional[Dict] = None):
        wandb_metrics = wandb_metrics or {}
        if self.percent_correct_buffer:
            wandb_metrics["train/percent_correct"] = (
                sum(self.percent_correct_buffer) / len(self.percent_correct_buffer))
        self.percent_correct_buffer = []
        await super().wandb_log(wandb_metrics)

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], list]:
        return await super().collect_trajectories(item)


if __name__ == "__main__":
    HermesCodingEnv.cli()
