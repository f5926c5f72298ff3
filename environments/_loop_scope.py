"""Rollouts that an environment's own code runs with ``HermesAgentLoop`` (former-layer style).

A former-layer ``evaluate()`` builds ``HermesAgentLoop(...)`` itself, without a task id, runs
it, then scores with ``ToolContext(agent.task_id)`` and its own ``compute_reward`` call. No
rollout scope surrounds that, so its traffic used to be recorded as "requests outside any
rollout", its reward nowhere. Here such a loop opens a scope of its own — an id made of its
first messages and how many loops of the same start this event loop ran before, so record and
replay agree — and remembers it by the loop's task id, so the later ``ToolContext`` calls and
the ``compute_reward`` call on that task land in the same rollout, with its reward.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import hermes_replay

__all__ = ["loop_rollout_id", "remember", "scope_for_task"]

_LOCK = threading.Lock()
_BY_TASK: dict[str, str] = {}
_COUNTS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def loop_rollout_id(messages: list[Any]) -> str:
    """``loop-<hash of the first messages>-<k>``; k counts same-start loops of this run."""
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False, default=repr)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    try:
        owner: Any = asyncio.get_running_loop()
    except RuntimeError:
        owner = _COUNTS  # no event loop: one process-wide count
    with _LOCK:
        try:
            counts = _COUNTS.setdefault(owner, {})
        except TypeError:
            counts = {}
        k = counts.get(digest, 0)
        counts[digest] = k + 1
    return f"loop-{digest}-{k}"


def remember(task_id: str, rollout_id: str) -> None:
    with _LOCK:
        _BY_TASK[task_id] = rollout_id


def forget(task_id: str) -> None:
    with _LOCK:
        _BY_TASK.pop(task_id, None)


@contextlib.contextmanager
def scope_for_task(task_id: str) -> Iterator[Any]:
    """Inside the rollout a former-style loop opened for ``task_id`` (when no scope is open
    already); otherwise nothing changes. Yields the scope, or None."""
    current = hermes_replay.current_rollout()
    with _LOCK:
        rollout_id = _BY_TASK.get(task_id)
    if current is not None or rollout_id is None:
        yield current
        return
    with hermes_replay.rollout(rollout_id) as scope:
        yield scope


def scoped_reward(compute_reward: Any) -> Any:
    """``compute_reward`` that, called by an environment's own code on a former-style loop's
    task (no rollout scope open), runs in that loop's rollout as its reward stage and reports
    the reward there — so the rollout is recorded with its reward and its reward calls."""
    import functools

    if getattr(compute_reward, "_hermes_scoped", False):
        return compute_reward

    @functools.wraps(compute_reward)
    async def wrapper(self: Any, item: Any, result: Any, ctx: Any, *args: Any,
                      **kwargs: Any) -> Any:
        task_id = getattr(ctx, "task_id", None)
        if hermes_replay.current_rollout() is not None or task_id is None:
            return await compute_reward(self, item, result, ctx, *args, **kwargs)
        with scope_for_task(task_id) as scope:
            if scope is None:
                return await compute_reward(self, item, result, ctx, *args, **kwargs)
            with hermes_replay.scoring():
                reward = await compute_reward(self, item, result, ctx, *args, **kwargs)
            try:
                scope.report(reward=float(reward))
            except (TypeError, ValueError):
                pass
            return reward

    wrapper._hermes_scoped = True  # type: ignore[attr-defined]
    return wrapper
