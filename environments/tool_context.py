"""``ToolContext``: reward code's handle on the sandbox a rollout used.

``ToolContext(task_id)`` reaches the sandbox of that task id — the files the agent wrote and
the processes it left running — through ``get_sandbox``, the same cache the agent loop's
tools use. Paths are sandbox paths, as the agent saw them: relative, or under ``/workspace``
(so the seed's ``ctx.terminal("pytest /workspace/test.py")`` works). ``cleanup()`` removes
the sandbox (kills its processes, deletes its directory) and the task's other tool state;
call it in ``finally`` (the base environment does).

Not blocking the event loop — the design and its trade-off
-----------------------------------------------------------
Rollouts of a group share one event loop, and ``compute_reward`` is ``async``. A *sync* call
made on the loop's thread cannot yield to the loop, whatever it does inside: the former layer
handed the command to a thread and then waited for it, which still froze every other rollout
for the command's whole duration (and risks deadlock if the worker ever needs the loop).
So this class offers two forms of every operation:

* ``await ctx.aterminal(...)``, ``aread_file``, ``awrite_file``, ``aupload_file``,
  ``adownload_file``, ``acall_tool``, ``acleanup`` — run the blocking part in the shared tool
  thread pool and suspend only the calling coroutine; other rollouts keep running. Use these
  in ``async def compute_reward``.
* ``ctx.terminal(...)`` and friends — the seed's synchronous interface, kept for
  compatibility. They run directly in the calling thread (no thread hop, so no deadlock).
  Called from a thread with no running event loop they are simply the normal API. Called
  on the loop's thread they work, but stall the loop for their duration; the first such call
  logs a warning that names the async form.

Failures raise (``PermissionError`` for a path outside the sandbox, ``FileNotFoundError`` …):
reward code is Python, and the base environment turns a raising ``compute_reward`` into a
logged 0.0. ``call_tool`` is the exception: it returns what the model would have seen,
turning a raising tool into ``{"error": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from environments.agent_loop import run_blocking
from environments.tools import cleanup_task, dispatch_tool, get_sandbox, get_tool
from environments.tools.sandbox import SandboxBackend

__all__ = ["ToolContext"]

log = logging.getLogger(__name__)
_warned_blocking = False


def _warn_if_on_loop(method: str) -> None:
    global _warned_blocking
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop in this thread: blocking is harmless
    if not _warned_blocking:
        _warned_blocking = True
        log.warning(
            "ToolContext.%s() was called on a running event loop's thread; it blocks every "
            "other rollout until it returns. In async code use `await ctx.a%s(...)`.",
            method,
            method,
        )


class ToolContext:
    """Terminal, files and tools of one task's sandbox, for reward verification."""

    def __init__(self, task_id: str, backend: str | None = None) -> None:
        # backend=None: whatever backend the rollout already used for this task, else "local".
        if not task_id:
            raise ValueError("ToolContext needs the task_id the rollout ran with")
        self.task_id = task_id
        self.backend = backend

    @property
    def sandbox(self) -> SandboxBackend:
        return get_sandbox(self.task_id, self.backend)

    # -- blocking implementations (run on the caller's thread or in the tool pool) ----------

    def _terminal(self, command: str, timeout: float) -> dict[str, Any]:
        result = self.sandbox.run(command, timeout=timeout)
        return {"exit_code": result.exit_code, "output": result.output}

    def _write_file(self, path: str, content: str) -> None:
        self.sandbox.write_file(path, content)

    def _call_tool(self, name: str, args: dict[str, Any] | str) -> str:
        get_tool(name)  # unknown names raise KeyError listing the registered tools
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        self.sandbox  # noqa: B018 - make sure the task's sandbox uses our backend first
        try:
            return dispatch_tool(name, args, self.task_id)
        except Exception as exc:
            return json.dumps({"error": f"Tool {name!r} raised {type(exc).__name__}: {exc}"})

    def _cleanup(self) -> None:
        cleanup_task(self.task_id)

    # -- synchronous API (the seed's interface) ---------------------------------------------

    def terminal(self, command: str, timeout: float = 120) -> dict[str, Any]:
        """Run a shell command in the sandbox → ``{"exit_code": int, "output": str}``."""
        _warn_if_on_loop("terminal")
        return self._terminal(command, timeout)

    def read_file(self, path: str) -> str:
        _warn_if_on_loop("read_file")
        return self.sandbox.read_file(path)

    def write_file(self, path: str, content: str) -> None:
        _warn_if_on_loop("write_file")
        self._write_file(path, content)

    def upload_file(self, local_path: str, remote_path: str) -> None:
        """Copy a host file or directory into the sandbox."""
        _warn_if_on_loop("upload_file")
        self.sandbox.upload(local_path, remote_path)

    def download_file(self, remote_path: str, local_path: str) -> None:
        """Copy a sandbox file or directory to the host."""
        _warn_if_on_loop("download_file")
        self.sandbox.download(remote_path, local_path)

    def call_tool(self, name: str, args: dict[str, Any] | str) -> str:
        """Run a registered tool as the agent would and return what the model would read."""
        _warn_if_on_loop("call_tool")
        return self._call_tool(name, args)

    def cleanup(self) -> None:
        """Kill the sandbox's processes, delete its files, drop the task's tool state."""
        self._cleanup()

    # -- awaitable API (does not block the event loop) --------------------------------------

    async def aterminal(self, command: str, timeout: float = 120) -> dict[str, Any]:
        return await run_blocking(self._terminal, command, timeout)

    async def aread_file(self, path: str) -> str:
        return await run_blocking(lambda: self.sandbox.read_file(path))

    async def awrite_file(self, path: str, content: str) -> None:
        await run_blocking(self._write_file, path, content)

    async def aupload_file(self, local_path: str, remote_path: str) -> None:
        await run_blocking(lambda: self.sandbox.upload(local_path, remote_path))

    async def adownload_file(self, remote_path: str, local_path: str) -> None:
        await run_blocking(lambda: self.sandbox.download(remote_path, local_path))

    async def acall_tool(self, name: str, args: dict[str, Any] | str) -> str:
        return await run_blocking(self._call_tool, name, args)

    async def acleanup(self) -> None:
        await run_blocking(self._cleanup)

    # -- context managers: cleanup always runs ----------------------------------------------

    def __enter__(self) -> ToolContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    async def __aenter__(self) -> ToolContext:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.acleanup()

    def __repr__(self) -> str:
        return f"ToolContext(task_id={self.task_id!r}, backend={self.backend!r})"
