"""Which recorded answer belongs to which of several identical concurrent requests.

One scope can send the same request several times at once: atroposlib's ``ServerManager``
splits ``n`` above ``max_n_completions`` into identical requests it gathers, and community
environments gather ``group_size`` identical ``chat_completion(n=1)`` calls themselves. Their
answers are joined in the order the tasks were *created*, but while recording they reach the
wire in whatever order atroposlib's health wait, semaphores and retries let them through
(observed: the second of two split requests first, because the first one's health-check sleep
ended later). Replay answers them in the order they ask, and in a replay nothing waits on I/O
before a request is sent, so that order is the creation order.

So a recording files the answers of identical requests of one scope in the order their tasks
were created, taken from the task's default name (``Task-<creation counter>``, which asyncio
numbers when it creates the task). Only requests with the same fingerprint trade places, so
what every other request is matched against stays as it was. A request made outside a task,
or from a task its creator named itself, keeps its order of issue.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["in_creation_order", "task_lane"]

_DEFAULT_NAME = re.compile(r"Task-(\d+)")

T = TypeVar("T")


def task_lane() -> int | None:
    """The creation number of the running asyncio task, or None when it has none we can read."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: a sync client, or another thread
        return None
    if task is None:
        return None
    match = _DEFAULT_NAME.fullmatch(task.get_name())
    return int(match.group(1)) if match else None


def in_creation_order(items: Sequence[tuple[str, int | None, T]]) -> list[T]:
    """``items`` — ``(fingerprint, lane, value)`` in order of issue — with the values of
    identical requests from different tasks put in their tasks' creation order, each group
    keeping the positions it had; a group holding a request with no lane stays as issued."""
    positions: dict[str, list[int]] = {}
    for i, (fingerprint, _, _) in enumerate(items):
        positions.setdefault(fingerprint, []).append(i)
    out = [value for _, _, value in items]
    for places in positions.values():
        lanes = [items[i][1] for i in places]
        if len(places) < 2 or any(lane is None for lane in lanes):
            continue
        # stable: requests of one task (same lane) keep their order of issue
        ordered = sorted(places, key=lambda i: items[i][1])  # type: ignore[arg-type,return-value]
        for place, source in zip(places, ordered, strict=True):
            out[place] = items[source][2]
    return out
