"""Toolset ``terminal``: one shell command in the task's sandbox.

The result is the JSON string ``{"output": str, "exit_code": int}``; a non-zero exit code
(124 on timeout) counts as a tool error (see ``registry.tool_result_error``), because a
failed command is exactly what reward code and metrics want to see.
"""

from __future__ import annotations

import json
from typing import Any

from .registry import register_task_cleanup, register_tool
from .sandbox import cleanup_sandbox, get_sandbox

__all__ = ["MAX_TIMEOUT", "terminal"]

#: upper bound on a timeout the model may ask for, so one call cannot hold a worker for hours
MAX_TIMEOUT = 3600.0

_SCHEMA = {
    "name": "terminal",
    "description": (
        "Run a shell command (bash) in your private working directory and return its combined "
        "stdout/stderr and exit code. Background processes are killed when the task ends."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run."},
            "timeout": {
                "type": "integer",
                "description": "Seconds before the command and its children are killed.",
            },
        },
        "required": ["command"],
    },
}


@register_tool("terminal", "terminal", _SCHEMA)
def terminal(args: dict[str, Any], task_id: str) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return json.dumps({"error": "terminal needs a non-empty string argument 'command'"})
    sandbox = get_sandbox(task_id)
    timeout = args.get("timeout")
    if timeout is None:
        timeout = sandbox.default_timeout
    elif not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        return json.dumps({"error": f"timeout must be a positive number of seconds: {timeout!r}"})
    result = sandbox.run(command, timeout=min(float(timeout), MAX_TIMEOUT))
    return json.dumps({"output": result.output, "exit_code": result.exit_code}, ensure_ascii=False)


register_task_cleanup(cleanup_sandbox)
