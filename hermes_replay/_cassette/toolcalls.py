"""Recorded tool calls: what a tool was asked, what it answered, as a cassette stores it.

A cassette line ``{"type": "tool", "rollout", "seq", "turn", "source", "name", "arguments",
"result", "exit_code", "raised", "duration_ms"}`` records one call made through
``hermes_replay.tool_call``:

- ``seq`` numbers a rollout's tool calls in order of issue (0, 1, 2 …), the key replay uses,
  like an LLM interaction's ``seq``; ``turn`` is the ``seq`` of the LLM interaction the call
  answers (the last request the rollout had issued; -1 before any);
- ``source`` is ``"agent"`` (the agent loop ran a call the model made) or ``"reward"``
  (``ToolContext`` used by ``compute_reward``/``evaluate``);
- ``result`` is the JSON value the tool returned (a string for agent tools, an object for
  ``terminal``), ``raised`` ``{"type", "args"}`` when it raised instead; ``exit_code`` is
  read off the result for ``show``/``diff`` (None when the result has none).

Long strings are stored once as blobs, shared with the LLM requests that echo them (a tool
result is the next request's tool message), so a file stays linear in its turns.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from pydantic import BaseModel

from hermes_replay._cassette.matching import unified_request_diff

__all__ = ["RecordedToolError", "ToolCall", "exit_code_of", "reraise", "tool_call_diff"]


class ToolCall(BaseModel):
    """One recorded tool call (redacted)."""

    rollout: str | None = None
    seq: int = 0
    turn: int = -1
    source: str = "agent"
    name: str
    arguments: Any = None
    result: Any = None
    exit_code: int | None = None
    raised: dict[str, Any] | None = None
    duration_ms: float = 0.0
    #: how this run came by the call when not simply by running it as the rollout went:
    #: "rescored" (a changed reward call run offline in the rollout's recorded workspace),
    #: "rerun" (run again to rebuild a rollout's world before it was re-recorded)
    origin: str | None = None

    @property
    def key(self) -> tuple[str | None, int]:
        return (self.rollout, self.seq)

    def request(self) -> dict[str, Any]:
        """What identifies the call (the part a replay must match)."""
        return {"source": self.source, "name": self.name, "arguments": self.arguments}

    def answer(self) -> dict[str, Any]:
        """What the call produced (the part ``execute`` compares for drift)."""
        if self.raised is not None:
            return {"raised": self.raised}
        return {"result": self.result, "exit_code": self.exit_code}

    def record(self) -> dict[str, Any]:
        """The cassette line (before blob encoding)."""
        data = {"type": "tool", **self.model_dump(mode="json")}
        data["duration_ms"] = round(self.duration_ms, 1)
        if self.raised is None:
            del data["raised"]
        if self.origin is None:
            del data["origin"]
        return data


class RecordedToolError(RuntimeError):
    """Raised on replay in place of a recorded exception whose type is not a builtin one
    (a subclass named like the recorded type, defined here: a cassette names, never loads,
    a class)."""


def exit_code_of(result: Any) -> int | None:
    """The ``exit_code`` of a terminal-like result (a dict, or a JSON object as text)."""
    if isinstance(result, str) and result.lstrip().startswith("{"):
        try:
            result = json.loads(result)
        except ValueError:
            return None
    if isinstance(result, dict):
        code = result.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None


def raised_record(exc: BaseException) -> dict[str, Any]:
    args = [a for a in exc.args if isinstance(a, (str, int, float, bool)) or a is None]
    if len(args) != len(exc.args):
        args = [str(exc)]
    return {"type": type(exc).__name__, "args": args}


def reraise(raised: dict[str, Any]) -> BaseException:
    """The exception a recorded call raised, rebuilt for replay.

    Builtin exception types (``FileNotFoundError``, ``PermissionError``, ``KeyError`` …) come
    back as themselves so reward code's ``except`` clauses behave as when recorded; any other
    type becomes ``RecordedToolError`` naming it (a cassette never chooses what class runs).
    """
    name = str(raised.get("type", "Exception"))
    args = raised.get("args") or []
    if not isinstance(args, list):
        args = [str(args)]
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(*args)
        except Exception:  # an exotic signature: fall through to the generic form
            pass
    if not name.isidentifier():
        name = "RecordedToolError"
    # a subclass of RecordedToolError carrying only the recorded *name*, so a message built
    # from ``type(exc).__name__`` and ``str(exc)`` reads exactly as when it was recorded
    return type(name, (RecordedToolError,), {})(*args)


def _lines(prefix: str, value: Any) -> list[str]:
    from hermes_replay._cassette.matching import _flatten

    out: list[str] = []
    _flatten(value, prefix, out)
    return out


def tool_call_diff(old: dict[str, Any], new: dict[str, Any], old_label: str,
                   new_label: str) -> str:
    """A field diff of two tool-call requests or answers, in the LLM miss diff's form.

    A string result that is itself JSON (a terminal result) is compared field by field.
    """
    return unified_request_diff(_lines("tool", _expand(old)), _lines("tool", _expand(new)),
                                old_label, new_label)


def _expand(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
