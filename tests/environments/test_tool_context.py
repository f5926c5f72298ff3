"""ToolContext: same sandbox as the rollout, sync and awaitable forms, cleanup."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid

import pytest
from openai.types.chat import ChatCompletion

from environments import tool_context as tool_context_module
from environments.agent_loop import HermesAgentLoop
from environments.tool_context import ToolContext
from environments.tools import register_tool, resolve_toolsets
from environments.tools import registry as registry_module
from environments.tools.sandbox import active_sandboxes, cleanup_sandbox, get_sandbox
from environments.tools.todo import todo_items


@pytest.fixture
def task_id():
    tid = f"test-ctx-{uuid.uuid4().hex[:8]}"
    yield tid
    ToolContext(tid).cleanup()


def _completion(content=None, tool_calls=None) -> ChatCompletion:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }
    )


class _Server:
    def __init__(self, *responses):
        self.responses = list(responses)

    async def chat_completion(self, **kwargs):
        return self.responses.pop(0)


async def test_reaches_the_sandbox_the_rollout_used(task_id):
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "write_file",
            "arguments": json.dumps({"path": "sol.py", "content": "print(6 * 7)\n"}),
        },
    }
    todo = {
        "id": "c2",
        "type": "function",
        "function": {"name": "todo", "arguments": '{"action": "add", "text": "verify"}'},
    }
    schemas, names = resolve_toolsets(None)
    server = _Server(_completion(None, [call, todo]), _completion("done"))
    await HermesAgentLoop(server, schemas, names, task_id=task_id).run([])

    ctx = ToolContext(task_id)
    assert (await ctx.aterminal("python sol.py")) == {"exit_code": 0, "output": "42\n"}
    assert await ctx.aread_file("sol.py") == "print(6 * 7)\n"
    assert json.loads(await ctx.acall_tool("todo", {"action": "list"}))["todos"][0]["text"] == (
        "verify"
    )
    await ctx.acleanup()
    assert task_id not in active_sandboxes()
    assert todo_items(task_id) == []


def test_sync_api_outside_an_event_loop(task_id, tmp_path, caplog):
    ctx = ToolContext(task_id)
    assert ctx.write_file("a/b.txt", "hello")["bytes_written"] == 5
    assert ctx.read_file("a/b.txt")["content"] == "hello"
    assert ctx.terminal("cat a/b.txt; exit 4") == {"exit_code": 4, "output": "hello"}
    assert ctx.terminal("sleep 5", timeout=0.2)["exit_code"] == 124

    (tmp_path / "in.txt").write_text("up")
    assert ctx.upload_file(str(tmp_path / "in.txt"), "up.txt") == {"exit_code": 0, "output": ""}
    assert ctx.download_file("up.txt", str(tmp_path / "out.txt")) == {"success": True, "bytes": 2}
    assert (tmp_path / "out.txt").read_text() == "up"

    assert json.loads(ctx.call_tool("read_file", {"path": "up.txt"}))["content"] == "up"
    assert json.loads(ctx.call_tool("read_file", '{"path": "up.txt"}'))["content"] == "up"
    assert "no tool named 'nope'" in json.loads(ctx.call_tool("nope", {}))["error"]
    # failures come back as {"error": ...}; they never raise (the former contract)
    assert "PermissionError" in ctx.read_file("../../outside.txt")["error"]
    assert "blocks every other rollout" not in caplog.text  # no loop, no warning


def test_call_tool_returns_error_text_when_the_tool_raises(task_id, monkeypatch):
    monkeypatch.setattr(registry_module, "_TOOLS", dict(registry_module._TOOLS))

    @register_tool("explode", "test", {})
    def explode(args, tid):
        raise ValueError("bad input")

    result = json.loads(ToolContext(task_id).call_tool("explode", {}))
    assert result == {"error": "Tool 'explode' raised ValueError: bad input"}


# A shell loop that waits (at most ~10 s) for a file to appear in its workspace, then says
# whether it did: a rendezvous that proves two things ran at once without timing anything.
def _wait_for(name: str) -> str:
    return (f"i=0; while [ ! -e {name} ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; "
            f"[ -e {name} ] && echo met || echo alone")


async def test_async_terminal_does_not_stall_other_rollouts(task_id):
    """While one call waits in its sandbox, the event loop is free to run another that lets it
    finish; a stalled loop could not create the file the first one waits for."""
    ctx = ToolContext(task_id)
    try:
        waiting = asyncio.create_task(ctx.aterminal(_wait_for("GO")))
        await ctx.awrite_file("GO", "")  # runs only if the loop is not blocked
        result = await waiting
        assert result["exit_code"] == 0 and result["output"].strip() == "met"
    finally:
        await ctx.acleanup()


async def test_sync_terminal_on_the_loop_works_but_blocks_and_warns(task_id, caplog, monkeypatch):
    """The documented trade-off: the seed's sync call still works, at the cost of the loop: a
    task that would let it finish never gets to run while it waits."""
    monkeypatch.setattr(tool_context_module, "_warned_blocking", False)
    ctx = ToolContext(task_id)
    released: list[str] = []

    async def release():
        released.append("ran")
        await ctx.awrite_file("GO", "")

    async def sync_call():
        return ctx.terminal(_wait_for("GO").replace("-lt 500", "-lt 20"))

    try:
        helper = asyncio.create_task(release())
        with caplog.at_level(logging.WARNING):
            result = await sync_call()
        assert result["output"].strip() == "alone" and released == []  # the loop was blocked
        await helper
    finally:
        await ctx.acleanup()
    assert "await ctx.aterminal" in caplog.text


async def test_two_rollouts_scoring_concurrently_overlap(task_id):
    """Two rewards' verifications run at the same time: each says it is ready and waits for a
    go that the test gives only once both are ready, so run one after the other, the first
    would wait alone."""
    a, b = ToolContext(f"{task_id}-a"), ToolContext(f"{task_id}-b")

    async def ready(ctx: ToolContext) -> None:
        for _ in range(500):
            try:
                await ctx.aread_file("READY")
                return
            except Exception:  # not there yet
                await asyncio.sleep(0.02)

    try:
        runs = [asyncio.create_task(ctx.aterminal("touch READY; " + _wait_for("GO")))
                for ctx in (a, b)]
        await asyncio.gather(ready(a), ready(b))
        await asyncio.gather(a.awrite_file("GO", ""), b.awrite_file("GO", ""))
        assert [(await run)["output"].strip() for run in runs] == ["met", "met"]
    finally:
        await a.acleanup()
        await b.acleanup()


def test_cleanup_removes_processes_and_files_and_is_idempotent(task_id, monkeypatch):
    monkeypatch.setenv("HERMES_SANDBOX", "none")  # a background job outliving its command
    ctx = ToolContext(task_id)
    pid = int(ctx.terminal("sleep 1000 >/dev/null 2>&1 & echo $!")["output"])
    base = get_sandbox(task_id).base_dir
    ctx.cleanup()
    ctx.cleanup()
    assert not os.path.exists(base)
    deadline = time.monotonic() + 3
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.02)
    else:
        assert not os.path.exists(f"/proc/{pid}")


async def test_context_managers_always_clean_up(task_id):
    with pytest.raises(RuntimeError), ToolContext(task_id) as ctx:
        ctx.write_file("x", "1")
        raise RuntimeError("reward crashed")
    assert task_id not in active_sandboxes()

    async with ToolContext(task_id) as actx:
        await actx.awrite_file("y", "2")
        assert task_id in active_sandboxes()
    assert task_id not in active_sandboxes()


async def test_async_file_transfer(task_id, tmp_path):
    ctx = ToolContext(task_id)
    (tmp_path / "src.txt").write_text("s")
    await ctx.aupload_file(str(tmp_path / "src.txt"), "s.txt")
    await ctx.adownload_file("s.txt", str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_text() == "s"


async def test_backend_choice(task_id):
    assert ToolContext(task_id).sandbox.name == "local"  # default when the task has none yet
    # the sync form answers with the error (the former contract), the awaitable form raises
    assert "already has a 'local' sandbox" in ToolContext(task_id, backend="docker").terminal(
        "ls")["error"]
    with pytest.raises(ValueError, match="already has a 'local' sandbox"):
        await ToolContext(task_id, backend="docker").aterminal("ls")
    cleanup_sandbox(task_id)
    with pytest.raises(NotImplementedError, match="not available"):
        await ToolContext(task_id, backend="docker").aterminal("ls")
    with pytest.raises(ValueError, match="task_id"):
        ToolContext("")


def test_seed_style_verification_with_workspace_paths(task_id):
    """The seed's reward code: ``ctx.terminal("pytest /workspace/test.py")``."""
    ctx = ToolContext(task_id)
    ctx.write_file("/workspace/sol.py", "def add(a, b):\n    return a + b\n")
    ctx.write_file("test.py", "from sol import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    # (plugin autoload off only to keep this nested pytest fast)
    result = ctx.terminal(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -q -p no:cacheprovider /workspace/test.py"
    )
    assert result["exit_code"] == 0, result["output"]
    assert "1 passed" in result["output"]
    ctx.write_file("sol.py", "def add(a, b):\n    return a - b\n")
    failed = ctx.terminal(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -q -p no:cacheprovider /workspace/test.py"
    )
    assert failed["exit_code"] == 1
    assert "/workspace/" in failed["output"] or "test.py" in failed["output"]


def test_sync_and_async_forms_share_every_default() -> None:
    """Switching ``ctx.terminal`` to ``await ctx.aterminal`` (the advice the sync form logs)
    must not change a recorded call: the arguments, defaults included, are what replay matches."""
    import inspect

    from environments.tool_context import ToolContext

    for name in ("terminal", "read_file", "write_file", "upload_file", "download_file",
                 "call_tool"):
        sync, async_ = getattr(ToolContext, name), getattr(ToolContext, "a" + name)
        sync_defaults = {k: p.default for k, p in inspect.signature(sync).parameters.items()
                         if p.default is not inspect.Parameter.empty}
        async_defaults = {k: p.default for k, p in inspect.signature(async_).parameters.items()
                          if p.default is not inspect.Parameter.empty}
        shared = set(sync_defaults) & set(async_defaults)
        assert {k: sync_defaults[k] for k in shared} == {k: async_defaults[k] for k in shared}
    assert inspect.signature(ToolContext.aterminal).parameters["timeout"].default == 180
