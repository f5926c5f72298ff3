"""The tool registry: tools in OpenAI function-schema form, grouped in toolsets.

A tool is a plain sync function ``fn(args: dict, task_id: str) -> str``; what it returns is
the text the model reads. Tools are registered at import (``register_tool``, usable as a
decorator). Registering the same definition again — an environment file run twice in one
process — is accepted and the newest function kept (so each run uses its own module
globals); a different function under a taken name is refused, naming both definitions, so two
modules cannot silently replace each other's tool. The agent loop runs tools in a thread
pool, so a tool may block (subprocess, disk).

Error rule (``tool_result_error``) — one rule for every tool, so ``AgentResult.tool_errors``
counts every failure and not only crashes:

* the result parses as a JSON object and has a truthy ``"error"`` → that error;
* it has an integer ``"exit_code"`` other than 0 → ``"exit code N"`` (a shell command failed,
  including a timeout, which is 124);
* it has ``"success": false`` → ``"success is false"`` (plus ``"message"`` if given);
* anything else (other JSON, plain text) is a success.

Tool authors report failure by returning ``{"error": "..."}`` — readable by the model and
counted — rather than raising; a raising tool is still caught and recorded by the loop.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from environments._definition import definition_of

__all__ = [
    "NOT_PROVIDED",
    "Tool",
    "ToolFunction",
    "cleanup_task",
    "define_toolset",
    "dispatch_tool",
    "get_tool",
    "register_task_cleanup",
    "register_tool",
    "resolve_toolsets",
    "tool_registry",
    "tool_result_error",
    "toolsets",
]

ToolFunction = Callable[[dict[str, Any], str], Any]


@dataclass(frozen=True)
class Tool:
    name: str
    toolset: str
    #: {"type": "function", "function": {"name", "description", "parameters"}}
    schema: dict[str, Any]
    fn: ToolFunction


_TOOLS: dict[str, Tool] = {}
#: toolsets made of tools registered under another toolset (``search`` = web_search)
_GROUPS: dict[str, tuple[str, ...]] = {}
#: toolsets of the former Hermes layer that this layer does not provide, and why; naming one in
#: ``disabled_toolsets`` is accepted (it is not offered anyway), enabling one stops at startup
NOT_PROVIDED: Mapping[str, str] = MappingProxyType({
    "browser": "no browser backend ships (browser_navigate, browser_snapshot …)",
    "vision": "no vision model tool ships",
    "image_gen": "no image generation tool ships",
    "memory": "agent memory belongs to the chat agent, not to RL rollouts",
    "session_search": "belongs to the chat agent, not to RL rollouts",
    "code_execution": "use the terminal toolset (commands run in the rollout's sandbox)",
    "moa": "mixture-of-agents calls other models; not provided",
    "skills": "belongs to the chat agent, not to RL rollouts",
    "clarify": "belongs to the chat agent, not to RL rollouts",
    "delegation": "belongs to the chat agent, not to RL rollouts",
    "messaging": "belongs to the chat agent, not to RL rollouts",
    "cronjob": "belongs to the chat agent, not to RL rollouts",
    "homeassistant": "belongs to the chat agent, not to RL rollouts",
    "tts": "belongs to the chat agent, not to RL rollouts",
    "rl": "belongs to the chat agent, not to RL rollouts",
})
#: tools of the former layer's chat agent (and of the toolsets above that do not ship), by
#: name → how the error names them. A model trained on Hermes transcripts calls them anyway;
#: the former layer answered such a call with an error saying the tool is not available in RL
#: environments, and reward code and tests written for it look for that answer.
HERMES_ONLY_TOOLS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "memory": ("Memory", "memory"),
    "session_search": ("Session search", "session_search"),
    "clarify": ("Clarify", "clarify"),
    "delegate_task": ("Delegation", "delegation"),
    "send_message": ("Messaging", "messaging"),
    "skills_list": ("Skills", "skills"),
    "skill_view": ("Skills", "skills"),
    "skill_manage": ("Skills", "skills"),
    "cronjob": ("Cron jobs", "cronjob"),
    "schedule_cronjob": ("Cron jobs", "cronjob"),
    "list_cronjobs": ("Cron jobs", "cronjob"),
    "remove_cronjob": ("Cron jobs", "cronjob"),
    "text_to_speech": ("Text to speech", "tts"),
    "mixture_of_agents": ("Mixture of agents", "moa"),
    "execute_code": ("Code execution", "code_execution"),
    "vision_analyze": ("Vision", "vision"),
    "image_generate": ("Image generation", "image_gen"),
    **{f"browser_{verb}": ("The browser", "browser") for verb in (
        "navigate", "snapshot", "click", "type", "scroll", "back", "press", "close",
        "get_images", "vision")},
})
_TASK_CLEANUPS: list[Callable[[str], None]] = []
_LOCK = threading.Lock()


def _normalise_schema(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Accept the full ``{"type": "function", "function": {...}}`` form or just the inner part."""
    inner = dict(schema["function"]) if "function" in schema else dict(schema)
    if inner.get("name", name) != name:
        raise ValueError(f"tool {name!r}: schema names a different tool {inner['name']!r}")
    inner["name"] = name
    inner.setdefault("description", "")
    inner.setdefault("parameters", {"type": "object", "properties": {}})
    return {"type": "function", "function": inner}


def register_tool(
    name: str, toolset: str, schema: Mapping[str, Any], fn: ToolFunction | None = None
):
    """Register ``fn`` as tool ``name`` in ``toolset``; without ``fn``, return a decorator."""

    def add(func: ToolFunction) -> ToolFunction:
        tool = Tool(name=name, toolset=toolset, schema=_normalise_schema(name, schema), fn=func)
        with _LOCK:
            old = _TOOLS.get(name)
            if old is not None and not _same_tool(old, tool):
                what = ("the same function with another toolset or schema"
                        if _same_fn(old.fn, func) else "a different definition")
                raise ValueError(
                    f"tool {name!r} is already registered (toolset {old.toolset!r}) by "
                    f"{definition_of(old.fn).location}; refusing {what} at "
                    f"{definition_of(func).location}. Next step: pick another name for one of "
                    "them (tool names are global to the process)."
                )
            _TOOLS[name] = tool  # same definition again: the newest function wins
        return func

    return add(fn) if fn is not None else add


def _same_fn(old: Any, new: Any) -> bool:
    return old is new or definition_of(old).key == definition_of(new).key


def _same_tool(old: Tool, new: Tool) -> bool:
    """The same source registered again (a module body run twice), with the same schema."""
    return _same_fn(old.fn, new.fn) and old.toolset == new.toolset and old.schema == new.schema


def tool_registry() -> Mapping[str, Tool]:
    """Read-only view of every registered tool, in registration order."""
    return MappingProxyType(_TOOLS)


def get_tool(name: str) -> Tool:
    try:
        return _TOOLS[name]
    except KeyError:
        raise KeyError(
            f"no tool named {name!r}; registered tools: {', '.join(sorted(_TOOLS))}"
        ) from None


def define_toolset(name: str, tool_names: Iterable[str]) -> None:
    """A toolset made of tools registered elsewhere (a tool has one home toolset)."""
    names = tuple(tool_names)
    with _LOCK:
        if name in _GROUPS or any(t.toolset == name for t in _TOOLS.values()):
            raise ValueError(f"toolset {name!r} already exists; pick another name")
        _GROUPS[name] = names


def toolsets() -> dict[str, list[str]]:
    """Toolset name → its tool names (registration order)."""
    out: dict[str, list[str]] = {}
    for tool in _TOOLS.values():
        out.setdefault(tool.toolset, []).append(tool.name)
    for name, members in _GROUPS.items():
        present = [t for t in members if t in _TOOLS]
        if present:
            out[name] = present
    return out


def resolve_toolsets(
    enabled: Iterable[str] | None = None, disabled: Iterable[str] | None = None
) -> tuple[list[dict[str, Any]], set[str]]:
    """The schemas and names of the tools an environment offers.

    ``enabled=None`` means every toolset; ``disabled`` is removed afterwards. An unknown
    toolset name (typo in a config file) raises ``ValueError`` listing the available ones
    rather than silently offering fewer tools. Schemas come back in registration order, so
    the request a model sees is stable between record and replay.
    """
    groups = toolsets()
    wanted_in = list(enabled) if enabled is not None else list(groups)
    unwanted = list(disabled or [])
    # a toolset of the former layer that is not provided may be disabled: it is not offered
    unknown = [n for n in wanted_in if n not in groups]
    unknown += [n for n in unwanted if n not in groups and n not in NOT_PROVIDED]
    if unknown:
        raise ValueError(
            f"unknown toolset(s) {', '.join(map(repr, unknown))} in enabled_toolsets/"
            f"disabled_toolsets; available toolsets: {', '.join(sorted(groups))}"
        )
    wanted_names = {t for ts in set(wanted_in) - set(unwanted) for t in groups[ts]}
    chosen = [t for t in _TOOLS.values() if t.name in wanted_names]
    return [json.loads(json.dumps(t.schema)) for t in chosen], {t.name for t in chosen}


def blocked_tool_error(name: str) -> str | None:
    """The error for a call to a Hermes-only tool (``HERMES_ONLY_TOOLS``), or None.

    None as well when a tool of that name is registered: an environment that brings its own
    ``memory`` tool gets it run.
    """
    if name in _TOOLS or name not in HERMES_ONLY_TOOLS:
        return None
    label, toolset = HERMES_ONLY_TOOLS[name]
    return f"{label} is not available in RL environments ({NOT_PROVIDED[toolset]})."


def dispatch_tool(name: str, args: dict[str, Any], task_id: str) -> str:
    """Run tool ``name`` for ``task_id``; a non-string result is JSON-encoded.

    Raises ``KeyError`` for an unknown tool; exceptions from the tool propagate (the agent
    loop turns them into an error message and a ``ToolError``).
    """
    result = get_tool(name).fn(args, task_id)
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def tool_result_error(result: str) -> str | None:
    """The error a tool result reports, or None. The rule is in the module docstring."""
    text = result.strip() if isinstance(result, str) else ""
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        err = data["error"]
        return err if isinstance(err, str) else json.dumps(err, ensure_ascii=False)
    code = data.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    if data.get("success") is False:
        msg = data.get("message")
        return f"success is false: {msg}" if msg else "success is false"
    return None


def register_task_cleanup(fn: Callable[[str], None]) -> Callable[[str], None]:
    """Register per-task state to drop when a task is cleaned up (todo lists, sandboxes).

    The same definition registered again (its module run twice) replaces the old hook rather
    than running twice.
    """
    with _LOCK:
        for i, old in enumerate(_TASK_CLEANUPS):
            if _same_fn(old, fn):
                _TASK_CLEANUPS[i] = fn
                return fn
        _TASK_CLEANUPS.append(fn)
    return fn


def cleanup_task(task_id: str) -> None:
    """Drop everything tools keep for ``task_id``; every hook runs even if one fails."""
    errors: list[BaseException] = []
    for fn in list(_TASK_CLEANUPS):
        try:
            fn(task_id)
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise RuntimeError(f"cleanup of task {task_id!r} failed: {errors[0]!r}") from errors[0]
