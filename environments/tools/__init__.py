"""Tools the agent can call, grouped in toolsets, and the sandboxes they act in.

Built-in toolsets: ``terminal`` (shell command), ``file`` (read_file, write_file,
search_files, patch), ``todo``, ``web`` (web_search, web_extract; needs a web backend, see
``web_backends``) and ``search`` (web_search). Importing this package registers them.
Named weighted mixes of toolsets are in ``distributions``. Add your own with
``register_tool(name, toolset, schema)`` as a decorator on ``fn(args, task_id) -> str``.
"""

from . import file_tools, terminal, todo, web  # noqa: F401  (register the built-in tools)
from .registry import (
    HERMES_ONLY_TOOLS,
    NOT_PROVIDED,
    Tool,
    blocked_tool_error,
    cleanup_task,
    define_toolset,
    dispatch_tool,
    get_tool,
    register_task_cleanup,
    register_tool,
    resolve_toolsets,
    tool_registry,
    tool_result_error,
    toolsets,
)
from .sandbox import SandboxBackend, cleanup_sandbox, get_sandbox, register_backend

__all__ = [
    "HERMES_ONLY_TOOLS",
    "NOT_PROVIDED",
    "SandboxBackend",
    "Tool",
    "blocked_tool_error",
    "cleanup_sandbox",
    "cleanup_task",
    "define_toolset",
    "dispatch_tool",
    "get_sandbox",
    "get_tool",
    "register_backend",
    "register_task_cleanup",
    "register_tool",
    "resolve_toolsets",
    "tool_registry",
    "tool_result_error",
    "toolsets",
]
