"""The multi-turn agent loop: model call → tool calls → tool results → model call …

``HermesAgentLoop.run(messages)`` makes one ``server.chat_completion`` per turn and returns an
``AgentResult``. It never raises for what a model or endpoint can do wrong: an API error or a
response without choices ends the rollout (``finished_naturally=False``, logged), and every
bad tool call becomes an error message the model can read plus a ``ToolError``.

Tool calls come from ``message.tool_calls`` (SDK objects or dicts, flat ``{"name",
"arguments"}`` or nested ``{"function": {...}}``). When a server returns none but the text
holds calls (a raw completion endpoint, or a server without a tool parser), the text is
parsed with ``environments.tool_call_parsers.get_parser(tool_call_parser)``.

A tool result is an error when ``environments.tools.tool_result_error`` says so: a JSON object
with a truthy ``"error"``, an integer ``"exit_code"`` other than 0, or ``"success": false``.
Unknown tools, arguments that are not a JSON object (the tool is not run) and tools that
raise are errors too. ``ToolError.turn`` is the 1-based number of the model call whose
tool call failed.

Every call goes through ``hermes_replay.tool_call``: recorded with the rollout while
recording, answered from the cassette on replay (nothing runs, no sandbox is made) unless the
replay asks to execute tools.

Tools are sync functions run in one bounded, module-level thread pool through
``run_in_executor``, so many rollouts on one event loop overlap while their tools block;
``resize_tool_pool(n)`` sets its size. The current ``contextvars`` context (the rollout scope
of the replay harness) is carried into the worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import logging
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from environments import _loop_scope
from environments._lifetime import touch
from environments.tool_budget import BudgetConfig, apply_budget
from environments.tools import (
    blocked_tool_error,
    dispatch_tool,
    get_sandbox,
    tool_result_error,
)
from hermes_replay import RequestNotRecorded, current_rollout, scrub, tool_call
from hermes_replay import rollout as hermes_replay_rollout

__all__ = ["AgentResult", "HermesAgentLoop", "ToolError", "resize_tool_pool", "tool_pool_size"]
# ``_extract_reasoning_from_message`` is importable too (the former layer's unit tests import
# it); it stays out of ``__all__`` as the private name it always was.

log = logging.getLogger(__name__)


@dataclass
class ToolError:
    """One failed tool call of a rollout."""

    turn: int  # 1-based model call that produced the failing call
    tool_name: str
    arguments: str  # the arguments as the model sent them (JSON text)
    error: str  # short description, e.g. "exit code 1" or "Unknown tool 'foo'"
    tool_result: str  # exactly what the model was shown as the tool message


@dataclass
class AgentResult:
    """The outcome of one rollout. Final answer and tools used are read from ``messages``."""

    messages: list[dict[str, Any]]
    managed_state: Any = None
    turns_used: int = 0  # model calls made, a failed or empty one included
    finished_naturally: bool = False  # the model answered without tool calls
    reasoning_per_turn: list[str | None] = field(default_factory=list)
    tool_errors: list[ToolError] = field(default_factory=list)


# -- the tool thread pool --------------------------------------------------------------------

_DEFAULT_POOL_SIZE = min(64, (os.cpu_count() or 1) * 4)
_POOL = ThreadPoolExecutor(max_workers=_DEFAULT_POOL_SIZE, thread_name_prefix="hermes-tool")
_POOL_SIZE = _DEFAULT_POOL_SIZE
_POOL_LOCK = threading.Lock()


def resize_tool_pool(n: int | None = None, *, max_workers: int | None = None) -> None:
    """Replace the tool thread pool with one of ``n`` workers (running tools finish first).

    ``max_workers=`` is the former layer's keyword for the same number; either works.
    """
    global _POOL, _POOL_SIZE
    if (n is None) == (max_workers is None):
        raise TypeError("resize_tool_pool takes one size: resize_tool_pool(n) or "
                        "resize_tool_pool(max_workers=n)")
    n = n if n is not None else max_workers
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"tool pool size must be a positive integer, not {n!r}")
    with _POOL_LOCK:
        old, _POOL, _POOL_SIZE = _POOL, ThreadPoolExecutor(n, thread_name_prefix="hermes-tool"), n
    old.shutdown(wait=False)


def tool_pool_size() -> int:
    return _POOL_SIZE


async def run_blocking(fn, *args: Any) -> Any:
    """Run ``fn(*args)`` in the tool pool, in a copy of the caller's ``contextvars`` context."""
    ctx = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_POOL, ctx.run, fn, *args)


# -- reading responses that may be SDK objects or dicts --------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """Field ``key`` of a pydantic object (including provider extras) or a dict."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    value = getattr(obj, key, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(key)
    return default if value is None else value


def _reasoning_text(message: Any) -> str | None:
    """Reasoning of one assistant message: reasoning_content, reasoning, or reasoning_details."""
    for key in ("reasoning_content", "reasoning"):
        value = _get(message, key)
        if isinstance(value, str) and value:
            return value
    details = _get(message, "reasoning_details")
    if isinstance(details, list) and details:
        parts = []
        for d in details:
            text = _get(d, "text") or _get(d, "summary")
            if isinstance(text, str) and text:
                parts.append(text)
        if parts:
            return "\n".join(parts)
        return json.dumps([d if isinstance(d, dict) else str(d) for d in details])
    if isinstance(details, str) and details:
        return details
    return None


def _extract_reasoning_from_message(message: Any) -> str | None:
    """The former layer's reading of one assistant message's reasoning, kept importable with
    its meaning: ``reasoning_content``, else ``reasoning``, else the first ``reasoning_details``
    entry with a ``text``; None when there is none.

    The loop itself uses ``_reasoning_text``, which keeps *every* detail's text (a provider
    that splits its reasoning into several details loses none of it in ``reasoning_per_turn``);
    on a message with one detail or none the two agree.
    """
    for key in ("reasoning_content", "reasoning"):
        value = _get(message, key)
        if isinstance(value, str) and value:
            return value
    details = _get(message, "reasoning_details")
    if isinstance(details, (list, tuple)):
        for detail in details:
            text = _get(detail, "text")
            if isinstance(text, str) and text:
                return text
    return None


def _normalise_call(call: Any, turn: int, index: int) -> dict[str, Any]:
    """An OpenAI-format tool call dict; arguments always a JSON string (or the raw text)."""
    fn = _get(call, "function")
    name = _get(fn, "name") if fn is not None else _get(call, "name")
    args = _get(fn, "arguments") if fn is not None else _get(call, "arguments")
    if args is None and fn is None:
        args = _get(call, "parameters")
    if args is None:
        args = "{}"
    elif not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    # Deterministic ids keep replayed requests identical to the recorded ones.
    call_id = _get(call, "id") or f"call_{turn}_{index}"
    return {
        "id": str(call_id),
        "type": "function",
        "function": {"name": str(name or ""), "arguments": args},
    }


class HermesAgentLoop:
    """Runs one rollout: the model talks, tools answer, until the model stops or turns run out."""

    def __init__(
        self,
        server: Any,
        tool_schemas: list[dict[str, Any]] | None,
        valid_tool_names: set[str] | list[str] | None,
        max_turns: int = 30,
        task_id: str | None = None,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        budget_config: BudgetConfig | None = None,
        tool_call_parser: str | Any | None = "hermes",
        terminal_backend: str = "local",
        terminal_timeout: float = 120,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, not {max_turns}")
        self.server = server
        self.tool_schemas = list(tool_schemas or [])
        self.valid_tool_names = set(valid_tool_names or [])
        self.max_turns = max_turns
        # Without a task id the loop makes one; its sandbox stays until the environment (or
        # ``ToolContext(agent.task_id).cleanup()``) removes it, as the former layer's did, so
        # reward code can read the agent's files after ``run()``.
        self._owns_task = task_id is None
        self.task_id = task_id or f"agent-loop-{uuid.uuid4().hex}"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = extra_body
        self.tool_call_parser = tool_call_parser
        self.terminal_backend = terminal_backend
        self.terminal_timeout = terminal_timeout
        self._parser: Any = self._load_parser(tool_call_parser)
        #: None means the defaults (100k per result, 200k per turn, 1.5k preview)
        self.budget_config = budget_config if budget_config is not None else BudgetConfig()

    # -- model side ------------------------------------------------------------------------

    def _request_kwargs(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": [dict(m) for m in messages],  # a copy: servers may keep or mutate it
            "n": 1,
            "temperature": self.temperature,
        }
        if self.tool_schemas:
            kwargs["tools"] = self.tool_schemas
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.extra_body is not None:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    @staticmethod
    def _load_parser(spec: Any) -> Any:
        """The text tool-call parser: an object with ``.parse(text)``, or a registered name.

        Resolved here so that a misspelt parser name fails when the loop is built (KeyError
        naming the available parsers), not in the middle of a rollout.
        """
        if spec is None or not isinstance(spec, str):
            return spec
        try:
            from environments.tool_call_parsers import get_parser
        except ImportError as exc:
            log.error(
                "cannot import environments.tool_call_parsers (%s); tool calls written in "
                "message text will be ignored",
                exc,
            )
            return None
        parser = get_parser(spec)
        return parser() if isinstance(parser, type) else parser

    def _tool_calls_of(self, message: Any, content: str, turn: int) -> tuple[str, list[dict]]:
        raw_calls = _get(message, "tool_calls") or []
        if not raw_calls and content:
            if self._parser is not None:
                try:
                    text, parsed = self._parser.parse(content)
                except Exception as exc:  # parsers must not raise; if one does, keep the text
                    log.warning("%s: tool-call parser raised %r", self._where(turn), exc)
                    text, parsed = content, None
                if parsed:
                    raw_calls, content = parsed, text or ""
        return content, [_normalise_call(c, turn, i) for i, c in enumerate(raw_calls)]

    def _where(self, turn: int) -> str:
        """Where a log line comes from: rollout (if a replay scope is active), task, turn."""
        scope = current_rollout()
        prefix = f"rollout {scope.id} " if scope is not None else ""
        return f"{prefix}task {self.task_id} turn {turn}"

    # -- tool side -------------------------------------------------------------------------

    def _dispatch(self, name: str, args: dict[str, Any]) -> str:
        """Worker-thread side of a call, through the replay harness's tool seam: under a
        replayed cassette the recorded result comes back and ``run`` (sandbox included) never
        happens; otherwise the task's sandbox is made to use our backend, then the tool runs."""

        def run() -> str:
            sandbox = get_sandbox(self.task_id, self.terminal_backend)
            sandbox.default_timeout = self.terminal_timeout
            touch(self.task_id)
            return dispatch_tool(name, args, self.task_id)

        return tool_call(name, args, run, source="agent")

    async def _run_tool(self, call: dict[str, Any], turn: int) -> tuple[str, ToolError | None]:
        """Run one call; return the tool message content and the error, if any."""
        name = call["function"]["name"]
        raw_args = call["function"]["arguments"]

        def failure(error: str) -> tuple[str, ToolError]:
            content = json.dumps({"error": error}, ensure_ascii=False)
            return content, ToolError(turn, name, raw_args, error, content)

        available = ", ".join(sorted(self.valid_tool_names)) or "none"
        blocked = blocked_tool_error(name)
        if blocked is not None:  # the former layer's answer for its chat-agent tools
            return failure(f"{blocked} Available tools: {available}.")
        if name not in self.valid_tool_names:
            return failure(f"Unknown tool {name!r}. Available tools: {available}.")
        try:
            args = json.loads(raw_args) if raw_args.strip() else {}
        except ValueError as exc:
            return failure(
                f"Invalid JSON arguments for tool {name!r} ({exc}); the tool was not run. "
                "Send the arguments as a JSON object."
            )
        if not isinstance(args, dict):
            return failure(
                f"Arguments for tool {name!r} must be a JSON object, not "
                f"{type(args).__name__}; the tool was not run."
            )
        try:
            # scrubbed before anyone sees it: a tool printing its environment must not hand
            # the API key to the model, the cassette or groups.jsonl
            result = scrub(await run_blocking(self._dispatch, name, args))
        except Exception as exc:
            log.warning("%s: tool %s raised %r", self._where(turn), name, exc)
            return failure(f"Tool {name!r} raised {type(exc).__name__}: {exc}")
        error = tool_result_error(result)
        if error is None:
            return result, None
        return result, ToolError(turn, name, raw_args, error, result)

    async def _within_budget(self, calls: list[dict[str, Any]], contents: list[str]
                             ) -> list[str]:
        """Apply the tool-result budget to one turn (see ``environments.tool_budget``)."""
        budget = self.budget_config
        if all(len(c) <= budget.preview_size for c in contents):
            return contents  # nothing could shrink: skip the thread hop

        def persist(path: str, content: str) -> str:
            def run() -> str:
                return get_sandbox(self.task_id, self.terminal_backend).write_file(path, content)

            # a tool call like any other: on replay the recorded path comes back, no sandbox
            # is made; the content is named by its digest (it is in the tool's own record)
            digest = hashlib.sha256(content.encode("utf-8", "replace")).hexdigest()[:16]
            return tool_call("save_tool_result", {"path": path, "chars": len(content),
                                                  "sha256": digest}, run, source="agent")

        items = [(c["id"], c["function"]["name"], content)
                 for c, content in zip(calls, contents, strict=True)]
        return await run_blocking(apply_budget, items, budget, persist)

    # -- the loop --------------------------------------------------------------------------

    async def run(self, messages: list[dict[str, Any]]) -> AgentResult:
        """Run the rollout from ``messages`` and return everything it produced.

        ``messages`` is extended in place as the conversation goes (the former layer's
        contract: a caller may watch it grow) and is the result's ``messages``. When the
        server has a ``get_state()`` (a Phase 2 ``ManagedServer``), its state is the
        result's ``managed_state``.
        """
        result = AgentResult(messages=messages)
        with self._own_scope(messages) as scope:
            try:
                await self._loop(messages, result)
            finally:
                self._finish(result)
            if scope is not None:
                scope.report(turns_used=result.turns_used,
                             finished_naturally=result.finished_naturally,
                             tool_errors=len(result.tool_errors), phase="loop")
        return result

    def _own_scope(self, messages: list[dict[str, Any]]) -> Any:
        """A rollout scope for a loop an environment's own code runs (no scope around it, no
        task id given): see ``environments._loop_scope``."""
        if not self._owns_task or current_rollout() is not None:
            return contextlib.nullcontext(None)
        rollout_id = _loop_scope.loop_rollout_id(messages)
        _loop_scope.remember(self.task_id, rollout_id)
        return hermes_replay_rollout(rollout_id)

    def _finish(self, result: AgentResult) -> None:
        get_state = getattr(self.server, "get_state", None)
        if callable(get_state):
            try:
                result.managed_state = get_state()
            except Exception as exc:
                log.warning("task %s: server.get_state() failed: %r", self.task_id, exc)

    async def _loop(self, history: list[dict[str, Any]], result: AgentResult) -> None:
        for turn in range(1, self.max_turns + 1):
            result.turns_used = turn  # counted before the call: a failed call is a turn too
            try:
                response = await self.server.chat_completion(**self._request_kwargs(history))
            except RequestNotRecorded as miss:
                # a replay miss ends this rollout at once; the replay fails with the diff
                log.error("%s: replay miss, ending the rollout: %s", self._where(turn), miss)
                return
            except Exception as exc:
                log.error(
                    "%s: chat_completion failed, ending the rollout (check the endpoint, "
                    "model name and key): %r",
                    self._where(turn),
                    exc,
                )
                return
            choices = _get(response, "choices")
            if not isinstance(choices, (list, tuple)) or not choices:
                log.error("%s: response has no choices; ending the rollout", self._where(turn))
                return
            message = _get(choices[0], "message")
            if message is None:
                log.error("%s: choice has no message; ending the rollout", self._where(turn))
                return
            reasoning = _reasoning_text(message)
            result.reasoning_per_turn.append(reasoning)
            content = _get(message, "content") or ""
            if not isinstance(content, str):
                content = json.dumps(content, ensure_ascii=False)
            content, calls = self._tool_calls_of(message, content, turn)

            assistant: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                assistant["tool_calls"] = calls
            if reasoning is not None:
                assistant["reasoning_content"] = reasoning
            history.append(assistant)

            if not calls:
                result.finished_naturally = True
                return
            outputs: list[tuple[str, ToolError | None]] = []
            missed = None
            for call in calls:
                try:
                    outputs.append(await self._run_tool(call, turn))
                except RequestNotRecorded as miss:  # a replayed tool call with no recording
                    missed = miss
                    break
            done = calls[: len(outputs)]
            try:
                shown = await self._within_budget(done, [content for content, _ in outputs])
            except RequestNotRecorded as miss:  # the saved-result record is missing
                missed, shown = missed or miss, [content for content, _ in outputs]
            for call, (_, error), content in zip(done, outputs, shown, strict=True):
                history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                if error is not None:
                    # the model saw the preview; the error itself is the tool's own
                    result.tool_errors.append(
                        error if content == error.tool_result else ToolError(
                            error.turn, error.tool_name, error.arguments, error.error, content))
            if missed is not None:
                log.error("%s: replay miss, ending the rollout: %s", self._where(turn), missed)
                return
        log.info("%s: stopped at max_turns=%d", self._where(self.max_turns), self.max_turns)
