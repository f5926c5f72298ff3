"""Example (a): a coding task scored by binary verification in the agent's own sandbox.

The agent writes ``solution.py`` with its tools; ``compute_reward`` runs the hidden tests in
the same sandbox (``ToolContext``), in a fresh folder beside a copy of ``solution.py``: 1.0 if
pytest reports every one passed, else 0.0. (``hermes-replay probe`` found that the first version,
which ran the tests in the working directory and trusted exit code 0, paid 1.0 for an
``os._exit(0)`` stub and for a planted ``conftest.py``/``pytest.ini``; see the README.)

    python environments/terminal_test_env.py process --env.total_steps 2 --env.group_size 4 \
        --env.data_path_to_save_groups out/terminal.jsonl \
        --openai.base_url <URL> --openai.model_name <MODEL> --openai.server_type openai
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import Field

from environments.agent_loop import AgentResult
from environments.helpers import (
    default_server_configs,
    final_response,
    load_items,
    mean,
    split_items,
)
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


# Known-good solutions of the built-in tasks (for `hermes-replay probe`'s known-good probe).
SOLUTIONS: dict[str, str] = {
    "add": "def add(a, b):\n    return a + b\n",
    "reverse_string": "def reverse_string(s):\n    return s[::-1]\n",
    "is_palindrome": "def is_palindrome(s):\n    return s == s[::-1]\n",
    "factorial": "def factorial(n):\n    out = 1\n    for k in range(2, n + 1):\n"
                 "        out *= k\n    return out\n",
    "count_vowels": "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
    "max_of_list": "def max_of_list(xs):\n    return max(xs)\n",
}


def _default_test_command() -> str:
    # `python` is the interpreter running the env (sandboxes put its folder first on PATH),
    # which has pytest. Not its absolute path: that differs between machines and between
    # `python`/`python3`, so the recorded reward command would not match on replay.
    # Plugin autoload off: the hidden tests need none, and it cuts pytest start-up ~10x.
    # -qq: no "1 passed in 0.06s" line, so the output is the same every time it runs; -rp
    # lists each passed test instead. `-I` keeps the working directory off sys.path (a planted
    # pytest.py or sitecustomize.py is never imported); --noconftest ignores conftest.py files.
    return ("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -I -m pytest -qq -rp -p no:cacheprovider "
            "--noconftest")


#: Where the hidden tests run: a folder the reward makes afresh, holding a copy of solution.py.
CHECK_DIR = ".hidden_check"
_PASSED = re.compile(r"^PASSED \S+::", re.MULTILINE)
_NOT_PASSED = re.compile(r"^(FAILED|ERROR) ", re.MULTILINE)


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

    def known_good_reply(self, item: dict[str, Any]) -> list[Any] | None:
        """For `hermes-replay probe`: write the known solution with the file tool, then say so."""
        solution = item.get("solution") or SOLUTIONS.get(item["id"])
        if not solution:
            return None
        return [{"content": None,
                 "tool_calls": [["write_file", {"path": "solution.py", "content": solution}]]},
                "Wrote solution.py."]

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        # Only solution.py is the agent's to give: the tests run in a fresh folder with a copy
        # of it and a pytest.ini of our own, so files planted in the sandbox (conftest.py,
        # pytest.ini addopts, edited tests) are not seen. And exit code 0 is not enough: an
        # `os._exit(0)` at import ends pytest "successfully" before it ran a test, so pytest's
        # own summary must report every hidden test passed.
        await ctx.aterminal(f"rm -rf {CHECK_DIR} && mkdir {CHECK_DIR} && "
                            f"cp solution.py {CHECK_DIR}/solution.py")
        await ctx.awrite_file(f"{CHECK_DIR}/pytest.ini", "[pytest]\n")
        await ctx.awrite_file(f"{CHECK_DIR}/test_hidden.py", item["tests"])
        run = await ctx.aterminal(f"cd {CHECK_DIR} && {self.config.test_command} test_hidden.py",
                                  timeout=self.config.test_timeout)
        passed = 1.0 if run["exit_code"] == 0 and all_passed(run["output"], item["tests"]) else 0.0
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


def all_passed(output: str, tests: str) -> bool:
    """pytest's summary (``-rp``) lists every test function of ``tests`` as passed."""
    expected = len(re.findall(r"^def test_", tests, re.MULTILINE))
    return (expected > 0 and len(_PASSED.findall(output)) == expected
            and _NOT_PASSED.search(output) is None)


def _from_row(row: dict[str, Any]) -> dict[str, Any] | None:
    if {"id", "instruction", "tests"} <= set(row):
        return {"id": str(row["id"]), "instruction": str(row["instruction"]),
                "tests": str(row["tests"]), "solution": str(row.get("solution") or "")}
    return None


if __name__ == "__main__":
    TerminalTestEnv.cli()
