"""A Hermes env in the seed's style whose reward reads the agent's sandbox (issue 44).

The agent computes a number with the terminal tool and writes it to ``answer.txt``; the reward
checks that file in the same sandbox — by ``cat`` (``CHECK = "cat"``) or by running ``pytest``
there (``CHECK = "pytest"``) — and adds 0.2 for using a tool and 0.2 for finishing within two
turns. The module constants are what the tests edit between recording and replaying, as an
author edits their env file.
"""

from __future__ import annotations

from typing import Any

from environments._config import default_server_configs
from environments.agent_loop import AgentResult, HermesAgentLoop
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_context import ToolContext

PARSER = "hermes"
CHECK = "cat"
REWARD_COMMAND = "cat answer.txt"
SYSTEM_PROMPT = "You are a careful assistant with a terminal."
ITEMS = [{"id": "pow_3_10", "expr": "3**10", "answer": 59049},
         {"id": "pow_2_16", "expr": "2**16", "answer": 65536},
         {"id": "pow_7_5", "expr": "7**5", "answer": 16807}]
TEST_FILE = ("import pathlib\n\n\ndef test_answer():\n"
             "    assert pathlib.Path('answer.txt').read_text().strip() == '{answer}'\n")


def score(correct: bool, used_tool: bool, turns: int) -> float:
    """The reward rule, also used by the tests to recompute rewards independently."""
    return 0.6 * correct + 0.2 * used_tool + 0.2 * (turns <= 2)


class AnswerEnv(HermesAgentBaseEnv):
    name = "answer-file"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls) -> tuple[HermesAgentEnvConfig, list[Any]]:
        config = HermesAgentEnvConfig(enabled_toolsets=["terminal"], max_agent_turns=4,
                                      group_size=2, eval_size=2, tool_call_parser=PARSER,
                                      system_prompt=SYSTEM_PROMPT)
        return config, default_server_configs()

    async def setup(self) -> None:
        self._index = 0

    async def get_next_item(self) -> dict[str, Any]:
        item = ITEMS[self._index % len(ITEMS)]
        self._index += 1
        return item

    def format_prompt(self, item: dict[str, Any]) -> str:
        return (f"Task {item['id']}: compute {item['expr']} with the terminal tool and write "
                "the number to answer.txt.")

    async def compute_reward(self, item: dict[str, Any], result: AgentResult,
                             ctx: ToolContext) -> float:
        if CHECK == "pytest":
            await ctx.awrite_file("test_answer.py", TEST_FILE.format(answer=item["answer"]))
            # no plugin autoload: a plugin installed in the host venv (hermes-replay's own, from
            # an editable install) is not importable inside the sandbox
            run = await ctx.aterminal("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -I -m pytest -q "
                                      "-p no:cacheprovider test_answer.py")
            correct = run["exit_code"] == 0
        else:
            run = await ctx.aterminal(REWARD_COMMAND)
            correct = run["output"].strip() == str(item["answer"])
        used_tool = any(m.get("tool_calls") for m in result.messages
                        if m.get("role") == "assistant")
        return score(correct, used_tool, result.turns_used)

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """Former-layer style: the env runs its own loops (no task id) and scores each with
        ``ToolContext(agent.task_id)`` after ``run()`` — the sandbox must still be there."""
        tools, names = self._resolve_tools_for_group()
        samples = []
        for item in ITEMS[:2]:
            agent = HermesAgentLoop(server=self.server, tool_schemas=tools,
                                    valid_tool_names=names, max_turns=4, temperature=0.0,
                                    tool_call_parser=PARSER)
            messages = [{"role": "system", "content": SYSTEM_PROMPT},
                        {"role": "user", "content": self.format_prompt(item)}]
            result = await agent.run(messages)
            ctx = ToolContext(agent.task_id)
            try:
                reward = await self.compute_reward(item, result, ctx)
            finally:
                ctx.cleanup()
            samples.append({"id": item["id"], "reward": reward})
        rewards = [s["reward"] for s in samples]
        await self.evaluate_log(metrics={"eval/mean_reward": sum(rewards) / len(rewards)},
                                samples=samples)


if __name__ == "__main__":
    AnswerEnv.cli()
