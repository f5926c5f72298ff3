"""Example (a): a coding task scored by binary verification in the agent's own sandbox.

The agent writes ``solution.py`` with its tools; ``compute_reward`` drops the hidden tests into
the same sandbox (``ToolContext``) and runs pytest there: 1.0 if they pass, else 0.0.

    python environments/terminal_test_env.py process --env.total_steps 2 --env.group_size 4 \
        --env.data_path_to_save_groups out/terminal.jsonl \
        --openai.base_url <URL> --openai.model_name <MODEL> --openai.server_type openai
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from environments._config import default_server_configs
from environments._examples import final_response, load_items, mean, split_items
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

BUILTIN_TASKS: list[dict[str, Any]] = [
    {"id": "add", "instruction": "Define add(a, b) that returns the sum of two numbers.",
     "tests": "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
              "    assert add(-1, 1) == 0\n"},
    {"id": "reverse_string", "instruction": "Define reverse_string(s) that returns s reversed.",
     "tests": "from solution import reverse_string\n\n\ndef test_reverse():\n"
              "    assert reverse_string('abc') == 'cba'\n    assert reverse_string('') == ''\n"},
    {"id": "is_palindrome",
     "instruction": "Define is_palindrome(s) that is True when s reads the same backwards.",
     "tests": "from solution import is_palindrome\n\n\ndef test_pal():\n"
              "    assert is_palindrome('level')\n    assert not is_palindrome('hermes')\n"},
    {"id": "factorial", "instruction": "Define factorial(n) for n >= 0 (factorial(0) == 1).",
     "tests": "from solution import factorial\n\n\ndef test_factorial():\n"
              "    assert factorial(0) == 1\n    assert factorial(5) == 120\n"},
    {"id": "count_vowels",
     "instruction": "Define count_vowels(s) that counts the letters a, e, i, o, u in s.",
     "tests": "from solution import count_vowels\n\n\ndef test_vowels():\n"
              "    assert count_vowels('banana') == 3\n    assert count_vowels('xyz') == 0\n"},
    {"id": "max_of_list", "instruction": "Define max_of_list(xs) returning the largest item.",
     "tests": "from solution import max_of_list\n\n\ndef test_max():\n"
              "    assert max_of_list([3, 9, 2]) == 9\n    assert max_of_list([-5]) == -5\n"},
]


def _default_test_command() -> str:
    # `python` is the interpreter running the env (sandboxes put its folder first on PATH),
    # which has pytest. Not its absolute path: that differs between machines and between
    # `python`/`python3`, so the recorded reward command would not match on replay.
    # Plugin autoload off: the hidden tests need none, and it cuts pytest start-up ~10x.
    # -qq: no "1 failed in 0.06s" line, so the output is the same every time it runs.
    return "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -qq -p no:cacheprovider"


class TerminalTestEnvConfig(HermesAgentEnvConfig):
    enabled_toolsets: list[str] | str | None = Field(
        default=["terminal", "file"], description="Toolsets offered to the model.")
    dataset_name: str | None = Field(
        default=None, description="Optional HF dataset with id/instruction/tests columns; "
        "never downloaded when offline, built-in tasks otherwise.")
    test_command: str = Field(
        default_factory=_default_test_command,
        description="Command run in the sandbox to verify; the test file name is appended.")
    test_timeout: int = Field(default=60, ge=1, description="Seconds the hidden tests may run.")


class TerminalTestEnv(HermesAgentBaseEnv):
    name = "terminal-test"
    env_config_cls = TerminalTestEnvConfig
    default_toolsets = ("terminal", "file")
    config: TerminalTestEnvConfig

    @classmethod
    def config_init(cls) -> tuple[TerminalTestEnvConfig, list[Any]]:
        # No provider assumed: endpoint/model come from --openai.* flags or YAML, the key from
        # HERMES_API_KEY / OPENAI_API_KEY (see environments._config).
        env_config = TerminalTestEnvConfig(max_agent_turns=8, group_size=4, eval_size=4)
        return env_config, default_server_configs()

    async def setup(self) -> None:
        items = load_items(self.config.dataset_name, "train", _from_row, BUILTIN_TASKS)
        self._items, self._eval_items = split_items(items, self.config.split_seed,
                                                    self.config.eval_size)
        self._index = 0
        self._pass_buffer: list[float] = []

    async def get_next_item(self) -> dict[str, Any]:
        item = self._items[self._index % len(self._items)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, Any]) -> str:
        return (f"Coding task {item['id']}: {item['instruction']}\n"
                "Write the code to solution.py in the current directory using your tools; "
                "hidden tests will import it. Reply with a one-line summary when done.")

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        await ctx.awrite_file("test_hidden.py", item["tests"])
        run = await ctx.aterminal(f"{self.config.test_command} test_hidden.py",
                                  timeout=self.config.test_timeout)
        passed = 1.0 if run["exit_code"] == 0 else 0.0
        self._pass_buffer.append(passed)
        return passed

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        items = self._eval_items[: self.config.eval_size]
        rollouts = await self.run_eval_rollouts(items)
        samples = [{"id": r.item["id"], "prompt": self.format_prompt(r.item),
                    "response": final_response(r.messages), "reward": r.reward,
                    "passed": r.reward >= 1.0, "turns_used": r.turns_used,
                    "tool_errors": r.tool_errors, "rollout_id": r.rollout_id} for r in rollouts]
        metrics = {"eval/pass_rate": mean([r.reward for r in rollouts]),
                   "eval/mean_turns": mean([float(r.turns_used) for r in rollouts]),
                   "eval/tool_errors_per_rollout": mean([float(r.tool_errors) for r in rollouts])}
        await self.evaluate_log(metrics=metrics, samples=samples, start_time=start,
                                end_time=time.time(),
                                generation_parameters={"temperature": 0.0,
                                                       "max_turns": self.config.max_agent_turns})

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        metrics = dict(wandb_metrics or {})
        if self._pass_buffer:
            metrics["train/pass_rate"] = mean(self._pass_buffer)
            self._pass_buffer.clear()
        await super().wandb_log(metrics)


def _from_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if {"id", "instruction", "tests"} <= set(row):
        return {"id": str(row["id"]), "instruction": str(row["instruction"]),
                "tests": str(row["tests"])}
    return None


if __name__ == "__main__":
    TerminalTestEnv.cli()
