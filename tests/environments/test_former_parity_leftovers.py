"""The last pieces of the former layer's interface (issue 24, item 7).

``_extract_reasoning_from_message`` importable from ``environments.agent_loop`` with its former
meaning, ``resize_tool_pool`` under both keyword spellings, and a model calling one of the chat
agent's tools (``memory``, ``session_search`` …) answered with the former layer's error. The
blocked calls come from the scripted endpoint through atroposlib's real ``ServerManager``,
driven by a script file.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from openai.types.chat import ChatCompletionMessage

from environments import agent_loop
from environments.agent_loop import (
    HermesAgentLoop,
    _extract_reasoning_from_message,
    resize_tool_pool,
)
from environments.tool_context import ToolContext
from environments.tools import HERMES_ONLY_TOOLS, register_tool, resolve_toolsets
from environments.tools import registry as registry_module
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def test_extract_reasoning_has_the_former_meaning():
    assert _extract_reasoning_from_message(SimpleNamespace(reasoning_content="a")) == "a"
    assert _extract_reasoning_from_message(SimpleNamespace(reasoning="b")) == "b"
    # reasoning_content wins over reasoning
    assert _extract_reasoning_from_message(
        SimpleNamespace(reasoning_content="a", reasoning="b")) == "a"
    # the first detail that has a text, objects and dicts alike
    details = [SimpleNamespace(text=""), {"text": "first"}, {"text": "second"}]
    assert _extract_reasoning_from_message(SimpleNamespace(reasoning_details=details)) == "first"
    assert _extract_reasoning_from_message(SimpleNamespace(content="no reasoning")) is None
    assert _extract_reasoning_from_message(SimpleNamespace(reasoning_details=[{"x": 1}])) is None
    # an SDK message: the provider's extra field is read too
    message = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": "hi", "reasoning_content": "thought"})
    assert _extract_reasoning_from_message(message) == "thought"


def test_resize_tool_pool_takes_the_former_keyword():
    before = agent_loop.tool_pool_size()
    try:
        resize_tool_pool(max_workers=3)
        assert agent_loop.tool_pool_size() == 3
        resize_tool_pool(5)
        assert agent_loop.tool_pool_size() == 5
        with pytest.raises(TypeError, match="one size"):
            resize_tool_pool(2, max_workers=2)
    finally:
        resize_tool_pool(before)


SCRIPT = """
fallback = "none"
[[rules]]
name = "hermes-habits"
when = { turn = 0 }
reply = { tool_calls = [
    { name = "memory", arguments = { action = "add", content = "the user likes cats" } },
    { name = "session_search", arguments = { query = "cats" } },
    { name = "terminal", arguments = { command = "echo still works" } },
] }
[[rules]]
name = "done"
reply = { text = "done" }
"""


async def test_blocked_hermes_tools_answer_not_available(tmp_path):
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager

    script = tmp_path / "habits.toml"
    script.write_text(SCRIPT, encoding="utf-8")
    schemas, names = resolve_toolsets(["terminal"], None)
    with ScriptedEndpoint(script=script) as ep:
        manager = ServerManager([APIServerConfig(
            base_url=ep.base_url, server_type="openai", health_check=False, api_key="x",
            model_name="scripted")])
        try:
            result = await HermesAgentLoop(manager, schemas, names, max_turns=3).run(
                [{"role": "user", "content": "remember that I like cats"}])
        finally:
            await manager.servers[0].openai.close()
    tool_msgs = [json.loads(m["content"]) for m in result.messages if m["role"] == "tool"]
    assert len(tool_msgs) == 3 and result.finished_naturally
    assert tool_msgs[0]["error"].startswith("Memory is not available in RL environments")
    assert tool_msgs[1]["error"].startswith("Session search is not available in RL environments")
    assert "Available tools: terminal" in tool_msgs[1]["error"]
    assert tool_msgs[2]["exit_code"] == 0  # the rest of the turn runs as usual
    assert [e.tool_name for e in result.tool_errors] == ["memory", "session_search"]


def test_tool_context_call_tool_answers_the_same(tmp_path):
    ctx = ToolContext("blocked-tools-test")
    try:
        answer = json.loads(ctx.call_tool("memory", {"action": "read"}))
    finally:
        ctx.cleanup()
    assert "not available in RL environments" in answer["error"]
    assert "chat agent" in answer["error"]  # the reason, not only the verdict
    assert set(HERMES_ONLY_TOOLS) >= {"memory", "session_search", "clarify", "delegate_task"}


def test_an_env_that_registers_its_own_memory_tool_gets_it(monkeypatch):
    monkeypatch.setattr(registry_module, "_TOOLS", dict(registry_module._TOOLS))
    register_tool("memory", "mine", {"description": "the env's own memory",
                                     "parameters": {"type": "object", "properties": {}}},
                  lambda args, task_id: {"stored": True})
    ctx = ToolContext("own-memory-test")
    try:
        assert json.loads(ctx.call_tool("memory", {})) == {"stored": True}
    finally:
        ctx.cleanup()
