"""HermesAgentLoop against a fake server that returns real openai ``ChatCompletion`` objects."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import uuid
from dataclasses import fields
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageToolCall

from environments import agent_loop
from environments.agent_loop import AgentResult, HermesAgentLoop, ToolError, resize_tool_pool
from environments.tools import cleanup_task, register_tool, resolve_toolsets
from environments.tools import registry as registry_module
from environments.tools.sandbox import active_sandboxes, get_sandbox


def completion(
    content: str | None = None, tool_calls: list[dict] | None = None, **extra: Any
) -> ChatCompletion:
    message: dict[str, Any] = {"role": "assistant", "content": content, **extra}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                    "message": message,
                }
            ],
        }
    )


def tc(name: str, args: dict | str, call_id: str = "call_1") -> dict:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeServer:
    """Plays back a list of responses (or exceptions); records every request's kwargs."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []

    async def chat_completion(self, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, BaseException):
            raise item
        return item


@pytest.fixture(autouse=True)
def _own_loops_cleaned_up():
    """A loop made without a task id keeps its sandbox for the caller (the former layer's
    contract); these tests are that caller, so they remove what such loops left."""
    before = set(active_sandboxes())
    yield
    for task in set(active_sandboxes()) - before:
        if task.startswith("agent-loop-"):
            cleanup_task(task)


@pytest.fixture
def task_id():
    tid = f"test-loop-{uuid.uuid4().hex[:8]}"
    yield tid
    cleanup_task(tid)


@pytest.fixture
def private_registry(monkeypatch):
    monkeypatch.setattr(registry_module, "_TOOLS", dict(registry_module._TOOLS))


ALL_SCHEMAS, ALL_NAMES = resolve_toolsets(None, None)
USER = [{"role": "user", "content": "do it"}]


def user() -> list[dict]:
    """A fresh conversation: ``run`` extends the list it is given in place."""
    return [dict(m) for m in USER]


def make_loop(server, task_id, names=None, **kwargs) -> HermesAgentLoop:
    names = ALL_NAMES if names is None else names
    schemas = [s for s in ALL_SCHEMAS if s["function"]["name"] in names]
    return HermesAgentLoop(server, schemas, names, task_id=task_id, **kwargs)


# -- shapes ----------------------------------------------------------------------------------


def test_result_dataclasses_have_exactly_the_contract_fields():
    assert [f.name for f in fields(AgentResult)] == [
        "messages",
        "managed_state",
        "turns_used",
        "finished_naturally",
        "reasoning_per_turn",
        "tool_errors",
    ]
    assert [f.name for f in fields(ToolError)] == [
        "turn",
        "tool_name",
        "arguments",
        "error",
        "tool_result",
    ]
    result = AgentResult(messages=[])
    for missing in ("final_response", "tool_calls", "tools_used"):
        assert not hasattr(result, missing)


async def test_request_kwargs_and_natural_finish(task_id):
    server = FakeServer(completion("the answer"))
    messages = [{"role": "system", "content": "sys"}, *USER]
    loop = make_loop(server, task_id, temperature=0.3, max_tokens=50, extra_body={"top_k": 5})
    result = await loop.run(messages)

    assert result.finished_naturally and result.turns_used == 1
    # the former contract: the caller's list is extended in place and is the result's list
    assert result.messages is messages
    assert messages == [{"role": "system", "content": "sys"}, *USER,
                        {"role": "assistant", "content": "the answer"}]
    (req,) = server.requests
    assert req["messages"] == messages[:2] and req["n"] == 1 and req["temperature"] == 0.3
    assert req["max_tokens"] == 50 and req["extra_body"] == {"top_k": 5}
    assert [t["function"]["name"] for t in req["tools"]] == [
        s["function"]["name"] for s in ALL_SCHEMAS
    ]
    assert result.tool_errors == [] and result.reasoning_per_turn == [None]


async def test_optional_kwargs_are_omitted_when_unset(task_id):
    server = FakeServer(completion("ok"))
    await HermesAgentLoop(server, [], set(), task_id=task_id).run(user())
    assert set(server.requests[0]) == {"messages", "n", "temperature"}
    assert server.requests[0]["temperature"] == 1.0


async def test_each_turn_gets_its_own_copy_of_the_messages(task_id):
    server = FakeServer(
        completion(None, [tc("terminal", {"command": "echo hi"})]), completion("done")
    )
    result = await make_loop(server, task_id).run(user())
    first, second = (r["messages"] for r in server.requests)
    assert len(first) == 1 and len(second) == 3  # later turns did not grow the first list
    assert first is not second
    assert second == result.messages[:3]


# -- tool calls ------------------------------------------------------------------------------


async def test_structured_tool_call_round_trip(task_id):
    server = FakeServer(
        completion("Let me look.", [tc("terminal", {"command": "echo hi"}, "call_abc")]),
        completion("It printed hi."),
    )
    result = await make_loop(server, task_id).run(user())
    assert result.finished_naturally and result.turns_used == 2
    assistant, tool, final = result.messages[1:]
    assert assistant == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [tc("terminal", {"command": "echo hi"}, "call_abc")],
    }
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_abc"
    assert json.loads(tool["content"]) == {"output": "hi\n", "exit_code": 0}
    assert final == {"role": "assistant", "content": "It printed hi."}


@pytest.mark.parametrize(
    "call",
    [
        {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}},  # flat, dict args
        {"name": "write_file", "arguments": '{"path": "f.txt", "content": "x"}'},  # flat, str
        {"function": {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}},
        {
            "id": "c9",
            "type": "function",
            "function": {"name": "write_file", "arguments": '{"path": "f.txt", "content": "x"}'},
        },
    ],
)
async def test_dict_tool_calls_flat_or_nested(task_id, call):
    """Servers (and fakes) may hand back plain dicts instead of SDK objects."""
    first = {"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [call]}}]}
    second = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}
    result = await make_loop(FakeServer(first, second), task_id).run(user())
    assert result.finished_naturally and result.tool_errors == []
    emitted = result.messages[1]["tool_calls"][0]
    assert emitted["type"] == "function" and emitted["function"]["name"] == "write_file"
    assert json.loads(emitted["function"]["arguments"]) == {"path": "f.txt", "content": "x"}
    assert emitted["id"] == call.get("id", "call_1_0")  # deterministic id when missing
    assert result.messages[2]["tool_call_id"] == emitted["id"]
    assert get_sandbox(task_id).read_file("f.txt") == "x"


async def test_calls_in_one_message_run_in_order(task_id):
    server = FakeServer(
        completion(
            None,
            [
                tc("write_file", {"path": "a.txt", "content": "first"}, "c1"),
                tc("patch", {"path": "a.txt", "old_string": "first", "new_string": "second"}, "c2"),
                tc("read_file", {"path": "a.txt"}, "c3"),
            ],
        ),
        completion("done"),
    )
    result = await make_loop(server, task_id).run(user())
    tool_msgs = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2", "c3"]
    assert json.loads(tool_msgs[2]["content"])["content"] == "second"


async def test_every_kind_of_tool_failure_is_readable_and_recorded(task_id, private_registry):
    ran = []

    @register_tool("boom", "test", {"description": "raises"})
    def boom(args, tid):
        ran.append(args)
        raise RuntimeError("kaput")

    names = {"terminal", "read_file", "boom"}
    server = FakeServer(
        completion(
            None,
            [
                tc("no_such_tool", {}, "c1"),
                tc("boom", "{not json", "c2"),
                tc("boom", "[1, 2]", "c3"),
                tc("boom", {"x": 1}, "c4"),
                tc("read_file", {"path": "missing.txt"}, "c5"),
                tc("terminal", {"command": "exit 3"}, "c6"),
                tc("terminal", {"command": "echo fine"}, "c7"),
            ],
        ),
        completion("gave up"),
    )
    result = await make_loop(server, task_id, names=names).run(user())

    assert ran == [{"x": 1}]  # invalid-JSON and non-object arguments never reach the tool
    errors = {e.tool_name + ":" + e.arguments: e for e in result.tool_errors}
    assert len(result.tool_errors) == 6
    assert all(e.turn == 1 for e in result.tool_errors)
    assert "Unknown tool 'no_such_tool'" in errors["no_such_tool:{}"].error
    assert "boom, read_file, terminal" in errors["no_such_tool:{}"].error
    assert "Invalid JSON" in errors["boom:{not json"].error
    assert "must be a JSON object" in errors["boom:[1, 2]"].error
    assert "RuntimeError: kaput" in errors['boom:{"x": 1}'].error
    assert "FileNotFoundError" in errors['read_file:{"path": "missing.txt"}'].error
    assert errors['terminal:{"command": "exit 3"}'].error == "exit code 3"

    tool_msgs = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert len(tool_msgs) == 7  # every call got an answer the model can read
    for e in result.tool_errors:
        assert e.tool_result in tool_msgs.values()
    assert json.loads(tool_msgs["c1"])["error"].startswith("Unknown tool")
    assert json.loads(tool_msgs["c6"]) == {"output": "", "exit_code": 3}
    assert json.loads(tool_msgs["c7"])["exit_code"] == 0


async def test_tool_error_turn_numbers(task_id):
    server = FakeServer(
        completion(None, [tc("terminal", {"command": "true"})]),
        completion(None, [tc("terminal", {"command": "false"})]),
        completion("done"),
    )
    result = await make_loop(server, task_id).run(user())
    assert [(e.turn, e.error) for e in result.tool_errors] == [(2, "exit code 1")]


async def test_terminal_timeout_setting_reaches_the_tool(task_id):
    server = FakeServer(
        completion(None, [tc("terminal", {"command": "sleep 10"})]), completion("x")
    )
    result = await make_loop(server, task_id, terminal_timeout=0.3).run(user())
    assert result.tool_errors[0].error == "exit code 124"  # killed at the timeout, not at 10 s


async def test_unavailable_terminal_backend_is_a_readable_tool_error(task_id):
    server = FakeServer(completion(None, [tc("terminal", {"command": "ls"})]), completion("x"))
    result = await make_loop(server, task_id, terminal_backend="docker").run(user())
    assert "not available" in result.tool_errors[0].error


# -- text tool calls (parser path) -----------------------------------------------------------


class FakeParser:
    def parse(self, text: str):
        if "CALL" not in text:
            return text, None
        call = ChatCompletionMessageToolCall.model_validate(tc("terminal", {"command": "echo p"}))
        return text.split("CALL")[0].strip() or None, [call]


async def test_text_tool_calls_are_parsed_when_none_are_structured(task_id):
    server = FakeServer(completion("thinking CALL terminal"), completion("done"))
    result = await make_loop(server, task_id, tool_call_parser=FakeParser()).run(user())
    assert result.messages[1]["content"] == "thinking"
    assert result.messages[1]["tool_calls"][0]["function"]["name"] == "terminal"
    assert json.loads(result.messages[2]["content"])["output"] == "p\n"
    assert result.turns_used == 2 and result.finished_naturally


async def test_structured_calls_win_over_text(task_id):
    server = FakeServer(
        completion("CALL in text", [tc("terminal", {"command": "echo s"})]), completion("done")
    )
    result = await make_loop(server, task_id, tool_call_parser=FakeParser()).run(user())
    assert result.messages[1]["content"] == "CALL in text"
    assert json.loads(result.messages[2]["content"])["output"] == "s\n"


async def test_hermes_parser_from_the_registry(task_id):
    text = 'ok <tool_call>{"name": "terminal", "arguments": {"command": "echo h"}}</tool_call>'
    server = FakeServer(completion(text), completion("done"))
    result = await make_loop(server, task_id).run(user())
    assert result.messages[1]["content"] == "ok"
    assert json.loads(result.messages[2]["content"]) == {"output": "h\n", "exit_code": 0}


# -- endings ---------------------------------------------------------------------------------


async def test_max_turns(task_id):
    server = FakeServer(completion(None, [tc("terminal", {"command": "true"})]))
    result = await make_loop(server, task_id, max_turns=3).run(user())
    assert result.turns_used == 3 and not result.finished_naturally
    assert len(server.requests) == 3
    assert [m["role"] for m in result.messages[1:]] == ["assistant", "tool"] * 3


def test_max_turns_must_be_positive():
    with pytest.raises(ValueError, match="max_turns"):
        HermesAgentLoop(FakeServer(), [], set(), max_turns=0)


async def test_api_error_ends_gracefully(task_id, caplog):
    server = FakeServer(
        completion(None, [tc("terminal", {"command": "true"})]), ConnectionError("endpoint down")
    )
    result = await make_loop(server, task_id).run(user())
    # the failed second call counts as a turn (the former layer's turns_used)
    assert not result.finished_naturally and result.turns_used == 2
    assert result.messages[-1]["role"] == "tool"
    assert "endpoint down" in caplog.text and "turn 2" in caplog.text


@pytest.mark.parametrize(
    "response",
    [
        ChatCompletion.model_validate(
            {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
        ),
        {"choices": None},
        {"choices": [{"message": None}]},
    ],
)
async def test_empty_choices_end_gracefully(task_id, response, caplog):
    result = await make_loop(FakeServer(response), task_id).run(user())
    assert not result.finished_naturally and result.turns_used == 1  # an empty call is a turn
    assert result.messages == USER
    assert "ending" in caplog.text


# -- reasoning -------------------------------------------------------------------------------


async def test_reasoning_from_each_field(task_id):
    server = FakeServer(
        completion(None, [tc("terminal", {"command": "true"})], reasoning_content="rc"),
        completion(None, [tc("terminal", {"command": "true"})], reasoning="plain"),
        completion(
            None,
            [tc("terminal", {"command": "true"})],
            reasoning_details=[{"type": "reasoning.text", "text": "d1"}, {"text": "d2"}],
        ),
        completion(None, [tc("terminal", {"command": "true"})]),
        completion("done", reasoning_details=[{"type": "reasoning.encrypted", "data": "zz"}]),
    )
    result = await make_loop(server, task_id).run(user())
    assert result.reasoning_per_turn[:4] == ["rc", "plain", "d1\nd2", None]
    assert json.loads(result.reasoning_per_turn[4]) == [
        {"type": "reasoning.encrypted", "data": "zz"}
    ]
    assistants = [m for m in result.messages if m["role"] == "assistant"]
    assert assistants[0]["reasoning_content"] == "rc"
    assert "reasoning_content" not in assistants[3]


async def test_reasoning_on_dict_messages(task_id):
    server = FakeServer({"choices": [{"message": {"content": "a", "reasoning_content": "why"}}]})
    result = await make_loop(server, task_id).run(user())
    assert result.reasoning_per_turn == ["why"]


# -- concurrency and the tool pool -----------------------------------------------------------


class _Gauge:
    """Counts the tool calls running at once (in the tool pool's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    def __enter__(self) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.running -= 1


def _blocking_tool_registry(meet: int) -> _Gauge:
    """A tool that blocks its thread until ``meet`` calls are inside it at once (or 10 s
    pass, and then reports that it ran alone)."""
    gauge = _Gauge()
    barrier = threading.Barrier(meet, timeout=10)

    @register_tool("slow", "test", {"description": "blocks until its peers arrive"})
    def slow(args, tid):
        with gauge:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return "alone"
        return "slept"

    return gauge


async def _run_slow_loops(n: int) -> list[str]:
    loops = [
        HermesAgentLoop(
            FakeServer(completion(None, [tc("slow", {})]), completion("done")),
            [],
            {"slow"},
            task_id=f"test-loop-slow-{i}-{uuid.uuid4().hex[:6]}",
        )
        for i in range(n)
    ]
    results = await asyncio.gather(*(loop.run(user()) for loop in loops))
    for loop in loops:
        cleanup_task(loop.task_id)
    assert all(r.finished_naturally for r in results)
    return [r.messages[2]["content"] for r in results]


async def test_rollouts_overlap_while_tools_block(private_registry):
    gauge = _blocking_tool_registry(meet=2)
    assert await _run_slow_loops(2) == ["slept", "slept"]  # each met the other mid-call
    assert gauge.most == 2


async def test_resize_tool_pool_bounds_concurrency(private_registry):
    gauge = _blocking_tool_registry(meet=1)
    previous = agent_loop.tool_pool_size()
    try:
        resize_tool_pool(1)
        assert agent_loop.tool_pool_size() == 1
        assert await _run_slow_loops(3) == ["slept"] * 3
        assert gauge.most == 1  # one worker: the tools ran one after the other
    finally:
        resize_tool_pool(previous)
    with pytest.raises(ValueError, match="positive integer"):
        resize_tool_pool(0)


async def test_contextvars_reach_the_tool_thread(private_registry, task_id):
    var: contextvars.ContextVar[str] = contextvars.ContextVar("test_var", default="unset")
    seen = []

    @register_tool("peek", "test", {})
    def peek(args, tid):
        seen.append((var.get(), threading.current_thread().name))
        return "ok"

    var.set("rollout-7")
    server = FakeServer(completion(None, [tc("peek", {})]), completion("done"))
    await HermesAgentLoop(server, [], {"peek"}, task_id=task_id).run(user())
    assert seen[0][0] == "rollout-7"
    assert seen[0][1].startswith("hermes-tool")


async def test_loop_without_task_id_keeps_its_sandbox_until_the_caller_cleans_up():
    """The former layer's contract: ``ToolContext(agent.task_id)`` after ``run()`` reads the
    agent's files; the caller (or the env) removes the sandbox."""
    from environments.tool_context import ToolContext

    server = FakeServer(completion(None, [tc("terminal", {"command": "touch x"})]), completion("d"))
    loop = HermesAgentLoop(server, [], {"terminal"})
    assert loop.task_id.startswith("agent-loop-")
    await loop.run(user())
    assert loop.task_id in active_sandboxes()
    ctx = ToolContext(loop.task_id)
    assert ctx.terminal("ls")["output"] == "x\n"
    ctx.cleanup()
    assert loop.task_id not in active_sandboxes()


async def test_given_task_id_keeps_its_sandbox_for_scoring(task_id):
    server = FakeServer(completion(None, [tc("terminal", {"command": "touch x"})]), completion("d"))
    await make_loop(server, task_id).run(user())
    assert task_id in active_sandboxes()
    assert get_sandbox(task_id).run("ls").output == "x\n"


def test_unknown_parser_name_fails_when_the_loop_is_built():
    with pytest.raises(KeyError, match="hermes"):
        HermesAgentLoop(FakeServer(), [], set(), tool_call_parser="no-such-format")


async def test_parser_none_leaves_text_alone(task_id):
    text = '<tool_call>{"name": "terminal", "arguments": {"command": "ls"}}</tool_call>'
    server = FakeServer(completion(text))
    result = await make_loop(server, task_id, tool_call_parser=None).run(user())
    assert result.finished_naturally and result.messages[-1]["content"] == text


class RaisingParser:
    def parse(self, text):
        raise RuntimeError("parser bug")


async def test_a_raising_parser_keeps_the_text(task_id, caplog):
    server = FakeServer(completion("plain answer"))
    result = await make_loop(server, task_id, tool_call_parser=RaisingParser()).run(user())
    assert result.finished_naturally and result.messages[-1]["content"] == "plain answer"
    assert "parser bug" in caplog.text


async def test_log_lines_name_the_rollout(task_id, caplog):
    from hermes_replay import rollout

    with rollout("train-abc-0-1"):
        await make_loop(FakeServer(RuntimeError("503")), task_id).run(user())
    assert "rollout train-abc-0-1 task test-loop-" in caplog.text
    assert "turn 1" in caplog.text
