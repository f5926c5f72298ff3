"""Toolset ``todo``: a per-task todo list the model keeps for itself (held in memory).

One tool, ``todo``, with ``action`` = ``add`` (needs ``text``), ``list``, or ``complete``
(needs ``id``). Every call returns the whole list, so the model always sees its state.
Lists are keyed by task id and dropped when the task is cleaned up.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .registry import register_task_cleanup, register_tool

__all__ = ["todo", "todo_items"]

_LISTS: dict[str, list[dict[str, Any]]] = {}
_LOCK = threading.Lock()


def todo_items(task_id: str) -> list[dict[str, Any]]:
    """A copy of the todo list of ``task_id`` (for reward code and tests)."""
    with _LOCK:
        return [dict(item) for item in _LISTS.get(task_id, [])]


@register_tool(
    "todo",
    "todo",
    {
        "description": "Keep a todo list for this task: add an item, list items, complete one.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "list", "complete"]},
                "text": {"type": "string", "description": "Item text (for add)."},
                "id": {"type": "integer", "description": "Item id (for complete)."},
            },
            "required": ["action"],
        },
    },
)
def todo(args: dict[str, Any], task_id: str) -> str:
    action = args.get("action")
    with _LOCK:
        items = _LISTS.setdefault(task_id, [])
        if action == "add":
            text = args.get("text")
            if not isinstance(text, str) or not text.strip():
                return json.dumps({"error": "action 'add' needs a non-empty 'text'"})
            items.append({"id": len(items) + 1, "text": text.strip(), "done": False})
        elif action == "complete":
            ids = [item["id"] for item in items]
            if args.get("id") not in ids:
                return json.dumps(
                    {"error": f"no todo item with id {args.get('id')!r}; existing ids: {ids}"}
                )
            items[ids.index(args["id"])]["done"] = True
        elif action != "list":
            return json.dumps(
                {"error": f"unknown action {action!r}; use 'add', 'list' or 'complete'"}
            )
        return json.dumps({"todos": [dict(i) for i in items]}, ensure_ascii=False)


@register_task_cleanup
def _forget(task_id: str) -> None:
    with _LOCK:
        _LISTS.pop(task_id, None)
