"""A user's environment with its own tool, registered at import as the ``environments.tools``
docstring says — the shape that broke a second run in one process. Used by the tests of
re-running an env file (CLI folder replay, two pytest tests, ``check``) and of runs that must
fail loudly (crash, no rollout, a rollout left out).

Switches, so one recorded cassette serves every test: ``--env.crash_in setup|reward`` (a flag,
so a cassette header can carry it) raises there; ``CALC_ENV_LEAK=1`` keeps a cache in an
imported module (``calc_state``) that changes rewards on a second run in the same process.
For the Ray executor's tests: ``CALC_ENV_JOURNAL=FILE`` appends one line per run started (its
groups path, which names the cassette's out folder, and its process id);
``CALC_ENV_DIE=NAME[@MARKER],...`` kills the process running a cassette whose groups path holds
NAME (a Ray worker dying mid-cassette) — with ``@MARKER``, only while MARKER does not exist yet
(it is made first), so the retry lives. ``CALC_ENV_POOL=1`` makes a process pool in ``setup``
and never shuts it down (math_server_zero grades in one).
"""

from __future__ import annotations

import ast
import json
import operator
import os
import time
from typing import Any

from pydantic import Field

from environments._config import default_server_configs
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext
from environments.tools.registry import register_tool

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("only numbers with + - *")


@register_tool("calculator", "calc", {
    "description": "Evaluate an arithmetic expression with + - * and return the number.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]},
})
def calculator(args: dict[str, Any], task_id: str) -> Any:
    try:
        return {"value": _evaluate(ast.parse(str(args.get("expression", "")), mode="eval").body)}
    except (SyntaxError, ValueError) as exc:
        return {"error": f"cannot evaluate: {exc}"}


ITEMS = [{"id": i, "question": f"What is {i} + {i + 1}? Use the calculator."} for i in range(4)]


def _journal_and_die(out: str) -> None:
    journal = os.environ.get("CALC_ENV_JOURNAL")
    if journal:
        with open(journal, "a", encoding="utf-8") as fh:  # one short line: an atomic append
            fh.write(json.dumps({"out": out, "pid": os.getpid()}) + "\n")
    for rule in filter(None, os.environ.get("CALC_ENV_DIE", "").split(",")):
        name, _, marker = rule.partition("@")
        if name not in out:
            continue
        if marker:
            if os.path.exists(marker):
                continue
            open(marker, "w").close()
        os._exit(17)  # as a worker killed from outside: no cleanup, no exception


class CalcEnvConfig(HermesAgentEnvConfig):
    crash_in: str = Field(default="", description="'setup' or 'reward': raise there (tests).")


class CalcEnv(HermesAgentBaseEnv):
    name = "calc-env"
    env_config_cls = CalcEnvConfig
    config: CalcEnvConfig

    @classmethod
    def config_init(cls) -> tuple[CalcEnvConfig, list[Any]]:
        config = CalcEnvConfig(enabled_toolsets=["calc"], max_agent_turns=3, group_size=2,
                               eval_size=2)
        return config, default_server_configs()

    async def setup(self) -> None:
        if os.environ.get("CALC_ENV_POOL"):  # before the journal line: it is there when noted
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(max_workers=1)
            self._pool.submit(abs, -1).result()
        _journal_and_die(str(self.config.data_path_to_save_groups or ""))
        if self.config.crash_in == "setup":
            raise RuntimeError("calc env: setup failed on purpose")
        self._index = 0

    async def get_next_item(self) -> dict[str, Any]:
        item = ITEMS[self._index % len(ITEMS)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, Any]) -> str:
        return item["question"]

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        if self.config.crash_in == "reward":
            raise SystemExit("calc env: gave up in compute_reward")
        called = any(m.get("role") == "tool" for m in result.messages)
        reward = 0.5 + 0.5 * called - 0.1 * len(result.tool_errors)
        if os.environ.get("CALC_ENV_LEAK"):
            import calc_state  # a module-level cache: survives into a second run

            if item["id"] in calc_state.SEEN:
                reward -= 0.25
            calc_state.SEEN.add(item["id"])
        return reward

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        rollouts = await self.run_eval_rollouts(ITEMS[: self.config.eval_size])
        rewards = [r.reward for r in rollouts]
        await self.evaluate_log(metrics={"eval/mean_reward": sum(rewards) / max(len(rewards), 1)},
                                samples=[], start_time=start, end_time=time.time())


if __name__ == "__main__":
    CalcEnv.cli()
