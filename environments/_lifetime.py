"""``terminal_lifetime``: a sandbox idle for longer than this is reaped.

Rollout sandboxes are removed when their rollout ends (``ToolContext.cleanup`` in ``finally``),
so this bounds the others: sandboxes that reward or eval code opened with a ``ToolContext`` of
its own and never cleaned up. Every tool call and ``ToolContext`` use marks its task as used;
before each rollout, the base environment reaps tasks idle for more than the lifetime.
"""

from __future__ import annotations

import threading
import time

from environments.tools import cleanup_task, register_task_cleanup
from environments.tools.sandbox import active_sandboxes

__all__ = ["reap_idle", "touch"]

_LAST_USED: dict[str, float] = {}
_LOCK = threading.Lock()


def touch(task_id: str) -> None:
    with _LOCK:
        _LAST_USED[task_id] = time.monotonic()


def reap_idle(lifetime: float, now: float | None = None) -> list[str]:
    """Clean up every sandbox unused for more than ``lifetime`` seconds; their task ids."""
    now = time.monotonic() if now is None else now
    idle = []
    with _LOCK:
        for task_id in active_sandboxes():
            last = _LAST_USED.setdefault(task_id, now)  # first seen: start its clock now
            if now - last > lifetime:
                idle.append(task_id)
    for task_id in idle:
        cleanup_task(task_id)
    return idle


@register_task_cleanup
def _forget(task_id: str) -> None:
    with _LOCK:
        _LAST_USED.pop(task_id, None)
