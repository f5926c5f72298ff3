"""The tool-result budget: oversized results go to a sandbox file, the model reads a preview."""

from __future__ import annotations

import json
import uuid

import pytest
from test_agent_loop import FakeServer, completion, tc

from environments.agent_loop import HermesAgentLoop
from environments.tool_budget import BudgetConfig, apply_budget, preview_text
from environments.tools import cleanup_task, resolve_toolsets
from environments.tools.sandbox import get_sandbox

SCHEMAS, NAMES = resolve_toolsets(["terminal", "file"])


@pytest.fixture
def task_id():
    tid = f"test-budget-{uuid.uuid4().hex[:8]}"
    yield tid
    cleanup_task(tid)


def _print(n: int, char: str = "x", code: int = 0) -> dict:
    return {"command": f"python3 -c \"print('{char}' * {n})\"; exit {code}"}


async def _run(task_id: str, calls: list[dict], budget: BudgetConfig | None):
    server = FakeServer(completion(None, calls), completion("done"))
    loop = HermesAgentLoop(server, SCHEMAS, NAMES, task_id=task_id, budget_config=budget)
    result = await loop.run([{"role": "user", "content": "go"}])
    tools = [m for m in result.messages if m["role"] == "tool"]
    return result, tools, server


async def test_an_oversized_result_is_saved_in_the_sandbox_and_previewed(task_id):
    budget = BudgetConfig(default_result_size=1_000, turn_budget=100_000, preview_size=100)
    result, (tool,), server = await _run(task_id, [tc("terminal", _print(5_000), "c1")], budget)
    full = json.dumps({"output": "x" * 5_000 + "\n", "exit_code": 0})
    assert tool["content"].startswith(f"[tool result too large: {len(full)} characters, saved "
                                      "to .tool_results/c1.txt")
    assert tool["content"].endswith("\n" + full[:100])
    assert len(tool["content"]) < 400
    assert get_sandbox(task_id).read_file(".tool_results/c1.txt") == full  # nothing lost
    # the model's next request carries the preview, not the 5 kB
    assert server.requests[1]["messages"][-1]["content"] == tool["content"]
    assert result.tool_errors == []


async def test_the_turn_budget_persists_the_largest_results_first(task_id):
    budget = BudgetConfig(default_result_size=10_000, turn_budget=2_000, preview_size=50)
    calls = [tc("terminal", _print(900, "a"), "c1"), tc("terminal", _print(1_500, "b"), "c2"),
             tc("terminal", _print(700, "c"), "c3")]
    _, tools, _ = await _run(task_id, calls, budget)
    assert tools[1]["content"].startswith("[tool result too large")  # the largest, only it
    assert json.loads(tools[0]["content"])["output"] == "a" * 900 + "\n"
    assert json.loads(tools[2]["content"])["output"] == "c" * 700 + "\n"
    assert sum(len(t["content"]) for t in tools) <= 2_000


async def test_read_file_is_never_persisted_so_a_saved_result_can_be_read(task_id):
    get_sandbox(task_id).write_file("big.txt", "y" * 5_000)
    budget = BudgetConfig(default_result_size=1_000, turn_budget=1_000, preview_size=100)
    _, (tool,), _ = await _run(task_id, [tc("read_file", {"path": "big.txt"}, "c1")], budget)
    assert json.loads(tool["content"])["content"] == "y" * 5_000


async def test_per_tool_overrides_raise_or_lower_a_threshold(task_id):
    kept = BudgetConfig(default_result_size=1_000, preview_size=100,
                        tool_overrides={"terminal": 10_000})
    _, (tool,), _ = await _run(task_id, [tc("terminal", _print(5_000), "c1")], kept)
    assert json.loads(tool["content"])["exit_code"] == 0
    lowered = BudgetConfig(tool_overrides={"terminal": 50}, preview_size=10)
    _, (tool,), _ = await _run(task_id, [tc("terminal", _print(60), "c2")], lowered)
    assert tool["content"].startswith("[tool result too large")


async def test_a_failed_oversized_result_is_still_a_tool_error(task_id):
    budget = BudgetConfig(default_result_size=1_000, preview_size=100)
    result, (tool,), _ = await _run(task_id, [tc("terminal", _print(5_000, code=3), "c1")],
                                    budget)
    (error,) = result.tool_errors
    assert error.error == "exit code 3" and error.tool_result == tool["content"]


async def test_default_budget_applies_when_none_is_given(task_id):
    loop = HermesAgentLoop(FakeServer(completion("x")), [], set(), task_id=task_id)
    assert loop.budget_config == BudgetConfig()


def test_a_sandbox_that_cannot_write_still_gets_a_bounded_preview():
    def broken(path: str, content: str) -> str:
        raise PermissionError("read-only")

    out = apply_budget([("c1", "terminal", "z" * 500)], BudgetConfig(default_result_size=100,
                                                                   preview_size=20), broken)
    assert out == [preview_text("z" * 500, None, 20, "PermissionError: read-only")]
    assert "could not be saved (PermissionError: read-only)" in out[0]


async def test_the_env_config_budget_reaches_the_loop(monkeypatch):
    from _hermes_env_helpers import make_env

    from environments import _rollout
    from environments.terminal_test_env import TerminalTestEnv
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    seen = []
    real = _rollout.HermesAgentLoop

    def spy(**kwargs):
        seen.append(kwargs["budget_config"])
        return real(**kwargs)

    monkeypatch.setattr(_rollout, "HermesAgentLoop", spy)
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        env = make_env(TerminalTestEnv, ep.base_url, group_size=1, turn_budget_chars=1234,
                       tool_result_overrides={"terminal": 77})
        await env.setup()
        await env.rollout(await env.get_next_item())
    assert seen[0].turn_budget == 1234 and seen[0].resolve_threshold("terminal") == 77
