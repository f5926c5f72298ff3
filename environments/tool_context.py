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

Every operation but ``cleanup`` goes through ``hermes_replay.tool_call`` (source ``"reward"``):
recorded with the rollout, and on a replayed cassette answered from it — the sandbox is then
never created and nothing runs. A download is recorded as the files it brought out, and
written to the host path by this class in every mode; an upload is recorded as a digest of
what was uploaded.

Two error styles, one per form. The synchronous methods keep the former layer's contract: every
one returns the tool's JSON result decoded, and a failure comes back as ``{"error": "..."}``
instead of raising (``read_file`` → ``{"content": ...}``, ``download_file`` → ``{"success",
"bytes"}``, ``call_tool`` → the raw JSON string), so reward code written for it runs unchanged.
The awaitable forms are ours: they return plain values (``aread_file`` → ``str``) and raise
(``PermissionError`` for a path outside the sandbox, ``FileNotFoundError`` …), which the base
environment turns into a logged 0.0 reward.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

from environments._lifetime import touch
from environments._loop_scope import scope_for_task
from environments.agent_loop import run_blocking
from environments.tools import (
    blocked_tool_error,
    cleanup_task,
    dispatch_tool,
    get_sandbox,
    get_tool,
)
from environments.tools.sandbox import SandboxBackend
from environments.tools.sandbox.base import active_sandboxes
from hermes_replay import tool_call

__all__ = ["ToolContext"]

log = logging.getLogger(__name__)
_warned_blocking = False
_NO_BROWSER = ("the browser toolset is not provided by hermes-replay's environments (no browser "
               "backend ships); remove browser checks from the reward or use terminal/web tools")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return f"{type(exc).__name__}: {exc}"


def _decoded(raw: str) -> dict[str, Any]:
    """A tool's JSON result as a dict; anything else as ``{"output": text}``."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {"output": raw}
    return value if isinstance(value, dict) else {"output": value}


def _files_under(top: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames))
    return found


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


def _reward_call(ctx: ToolContext, name: str, args: Any, run: Any) -> Any:
    """One reward-side call through the harness, inside the rollout of the task's agent loop
    when that loop opened one of its own (a former-layer ``evaluate``)."""
    with scope_for_task(ctx.task_id):
        return tool_call(name, args, run, source="reward", world=ctx._world)


class _SandboxWorld:
    """This task's sandbox as ``hermes_replay`` sees it when it records the workspace the
    reward starts from, or restores one to re-score a changed reward offline."""

    def __init__(self, ctx: ToolContext) -> None:
        self._ctx = ctx

    def root(self, create: bool) -> str | None:
        if not create and self._ctx.task_id not in active_sandboxes():
            return None  # the agent never used a tool: its world is empty
        return getattr(self._ctx.sandbox, "work_dir", None)

    def settle(self) -> None:
        sandbox = self._ctx.sandbox
        give = getattr(sandbox, "_give_to_sandbox", None)
        if give is not None:  # root mode: the restored files become the sandbox user's
            give(sandbox.work_dir)


class ToolContext:
    """Terminal, files and tools of one task's sandbox, for reward verification."""

    def __init__(self, task_id: str, backend: str | None = None) -> None:
        # backend=None: whatever backend the rollout already used for this task, else "local".
        if not task_id:
            raise ValueError("ToolContext needs the task_id the rollout ran with")
        self.task_id = task_id
        self.backend = backend
        self._world = _SandboxWorld(self)

    @property
    def sandbox(self) -> SandboxBackend:
        touch(self.task_id)  # terminal_lifetime counts idle time from here
        return get_sandbox(self.task_id, self.backend)

    # -- blocking implementations (run on the caller's thread or in the tool pool) ----------

    def _terminal(self, command: str, timeout: float) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            result = self.sandbox.run(command, timeout=timeout)
            return {"exit_code": result.exit_code, "output": result.output}

        return _reward_call(self, "terminal", {"command": command, "timeout": timeout}, run)

    def _read_file(self, path: str) -> str:
        return _reward_call(self, "read_file", {"path": path}, lambda: self.sandbox.read_file(path))

    def _write_file(self, path: str, content: str) -> None:
        def run() -> None:
            self.sandbox.write_file(path, content)

        _reward_call(self, "write_file", {"path": path, "content": content}, run)

    def _upload(self, local_path: str, remote_path: str) -> None:
        def run() -> None:
            self.sandbox.upload(local_path, remote_path)

        # the host path differs between machines and runs; what was uploaded does not
        args = {"remote_path": remote_path, "sha256": _digest(Path(local_path))}
        _reward_call(self, "upload_file", args, run)

    def _download(self, remote_path: str, local_path: str) -> None:
        files = _reward_call(self, "download_file", {"remote_path": remote_path},
                          lambda: self._fetch(remote_path))
        _write_files(files, Path(local_path))

    def _fetch(self, remote_path: str) -> dict[str, str]:
        """The files at ``remote_path`` as ``{relative path: base64}`` ("" for a single file)."""
        with tempfile.TemporaryDirectory(prefix="hermes-download-") as tmp:
            target = Path(tmp) / "out"
            self.sandbox.download(remote_path, str(target))
            if target.is_file():
                return {"": base64.b64encode(target.read_bytes()).decode("ascii")}
            return {str(p.relative_to(target)): base64.b64encode(p.read_bytes()).decode("ascii")
                    for p in sorted(target.rglob("*")) if p.is_file()}

    def _call_tool(self, name: str, args: dict[str, Any] | str) -> str:
        blocked = blocked_tool_error(name)
        if blocked is not None:  # the former layer's answer for its chat-agent tools
            return json.dumps({"error": blocked}, ensure_ascii=False)
        try:
            get_tool(name)  # unknown names: KeyError listing the registered tools
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            if not isinstance(args, dict):
                raise TypeError(f"arguments must be a JSON object, not {type(args).__name__}")
        except Exception as exc:
            return json.dumps({"error": _describe(exc)}, ensure_ascii=False)

        def run() -> str:
            self.sandbox  # noqa: B018 - make sure the task's sandbox uses our backend first
            return dispatch_tool(name, args, self.task_id)

        try:
            return _reward_call(self, name, args, run)
        except Exception as exc:
            return json.dumps({"error": f"Tool {name!r} raised {type(exc).__name__}: {exc}"},
                              ensure_ascii=False)

    def _cleanup(self) -> None:
        cleanup_task(self.task_id)

    # -- synchronous API (the former layer's interface: decoded JSON, errors as {"error"}) ---

    def terminal(self, command: str, timeout: float = 180) -> dict[str, Any]:
        """Run a shell command in the sandbox → ``{"exit_code": int, "output": str}``."""
        _warn_if_on_loop("terminal")
        try:
            return self._terminal(command, timeout)
        except Exception as exc:
            return {"exit_code": -1, "output": _describe(exc), "error": _describe(exc)}

    def read_file(self, path: str) -> dict[str, Any]:
        """``{"path", "content"}`` (the ``read_file`` tool's result), or ``{"error": ...}``."""
        _warn_if_on_loop("read_file")
        return _decoded(self._call_tool("read_file", {"path": path}))

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        """``{"path", "bytes_written"}``, or ``{"error": ...}``."""
        _warn_if_on_loop("write_file")
        return _decoded(self._call_tool("write_file", {"path": path, "content": content}))

    def search(self, query: str, path: str = ".") -> dict[str, Any]:
        """``search_files`` with ``query`` as the pattern → ``{"matches": [...]}``."""
        _warn_if_on_loop("search")
        return _decoded(self._call_tool("search_files", {"pattern": query, "path": path}))

    def upload_file(self, local_path: str, remote_path: str) -> dict[str, Any]:
        """Copy a host file into the sandbox (bytes as they are) → ``{"exit_code", "output"}``."""
        _warn_if_on_loop("upload_file")
        try:
            self._upload(local_path, remote_path)
        except Exception as exc:
            return {"exit_code": 1, "output": _describe(exc)}
        return {"exit_code": 0, "output": ""}

    def upload_dir(self, local_dir: str, remote_dir: str) -> list[dict[str, Any]]:
        """Every file under ``local_dir`` uploaded; one ``upload_file`` result per file."""
        if not os.path.isdir(local_dir):
            return [{"exit_code": 1, "output": f"not a directory: {local_dir}"}]
        results = []
        for host_path in _files_under(local_dir):
            rel = os.path.relpath(host_path, local_dir).split(os.sep)
            results.append(self.upload_file(host_path, posixpath.join(remote_dir, *rel)))
        return results

    def download_file(self, remote_path: str, local_path: str) -> dict[str, Any]:
        """Copy a sandbox file to the host → ``{"success": True, "bytes": n}`` or ``{"success":
        False, "error": ...}``."""
        _warn_if_on_loop("download_file")
        try:
            self._download(remote_path, local_path)
            return {"success": True, "bytes": os.path.getsize(local_path)}
        except Exception as exc:
            return {"success": False, "error": _describe(exc)}

    def download_dir(self, remote_dir: str, local_dir: str) -> list[dict[str, Any]]:
        """The sandbox folder copied to ``local_dir``; one ``download_file`` result per file."""
        _warn_if_on_loop("download_dir")
        try:
            self._download(remote_dir, local_dir)
        except Exception as exc:
            return [{"success": False, "error": _describe(exc)}]
        return [{"success": True, "bytes": os.path.getsize(p), "path": p}
                for p in _files_under(local_dir)]

    def web_search(self, query: str) -> dict[str, Any]:
        """The ``web_search`` tool's result (the configured web backend)."""
        _warn_if_on_loop("web_search")
        return _decoded(self._call_tool("web_search", {"query": query}))

    def web_extract(self, urls: list[str]) -> dict[str, Any]:
        """The ``web_extract`` tool's result for ``urls``."""
        _warn_if_on_loop("web_extract")
        return _decoded(self._call_tool("web_extract", {"urls": list(urls)}))

    def browser_navigate(self, url: str) -> dict[str, Any]:
        return {"error": _NO_BROWSER}

    def browser_snapshot(self) -> dict[str, Any]:
        return {"error": _NO_BROWSER}

    def call_tool(self, tool_name: str | None = None, arguments: dict[str, Any] | str | None = None,
                  *, name: str | None = None, args: dict[str, Any] | str | None = None) -> str:
        """Run a registered tool as the agent would; the raw JSON string the model would read.

        ``call_tool(tool_name=..., arguments=...)`` (the former names) and ``call_tool(name=...,
        args=...)`` both work; an unknown tool or bad arguments give ``{"error": ...}``."""
        _warn_if_on_loop("call_tool")
        tool = tool_name if tool_name is not None else name
        if tool is None:
            raise TypeError("call_tool() needs the tool's name (tool_name=...)")
        return self._call_tool(tool, arguments if arguments is not None else (args or {}))

    def cleanup(self) -> None:
        """Kill the sandbox's processes, delete its files, drop the task's tool state."""
        self._cleanup()

    # -- awaitable API (does not block the event loop) --------------------------------------

    async def aterminal(self, command: str, timeout: float = 180) -> dict[str, Any]:
        return await run_blocking(self._terminal, command, timeout)

    async def aread_file(self, path: str) -> str:
        return await run_blocking(self._read_file, path)

    async def awrite_file(self, path: str, content: str) -> None:
        await run_blocking(self._write_file, path, content)

    async def aupload_file(self, local_path: str, remote_path: str) -> None:
        await run_blocking(self._upload, local_path, remote_path)

    async def adownload_file(self, remote_path: str, local_path: str) -> None:
        await run_blocking(self._download, remote_path, local_path)

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


def _digest(path: Path) -> str:
    """Content hash of a host file or directory tree (names and bytes)."""
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
    elif path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(str(item.relative_to(path)).encode() + b"\0" + item.read_bytes())
    else:
        raise FileNotFoundError(f"upload_file: no such host file or directory: {path}")
    return digest.hexdigest()[:16]


def _write_files(files: Any, local_path: Path) -> None:
    """Put downloaded files at ``local_path``; a recorded path never leaves that folder."""
    if not isinstance(files, dict):
        raise ValueError("download_file: the recorded download is not a file listing")
    if set(files) == {""}:
        local_path.parent.mkdir(parents=True, exist_ok=True)
        local_path.write_bytes(base64.b64decode(files[""]))
        return
    local_path.mkdir(parents=True, exist_ok=True)
    root = local_path.resolve()
    for rel, data in files.items():
        target = (root / rel).resolve()
        if rel.startswith("/") or os.path.commonpath([root, target]) != str(root):
            raise PermissionError(f"download_file: {rel!r} would land outside {local_path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(data))
