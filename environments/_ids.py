"""Rollout and task identity: the environment layer's rule, the same on every machine.

A cassette finds a rollout's recordings by its id, so the id must be the same when recording
and when replaying: it is made from the item's content, how many times that item has been drawn
so far, and the group slot — never from a uuid or a clock. The task id (the sandbox's name,
which tools may print into prompts) is derived from the rollout id for the same reason.

Workers of one configuration draw the same items, so a worker's identity is part of the id:
``train-<hash>-0-2@w1`` (worker ``w0`` keeps the plain id). The identity is the
``HERMES_REPLAY_WORKER`` variable (``hermes-replay record|replay --worker NAME`` sets it), or
in ``serve`` the order in which same-named workers registered with the trajectory API
(``worker_from_registration``). The harness's side of the rule is
``hermes_replay._session.workers``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from typing import Any

__all__ = ["WORKER_VARIABLE", "item_fingerprint", "rollout_id_for", "task_id_for",
           "worker_from_environment", "worker_from_registration"]

WORKER_VARIABLE = "HERMES_REPLAY_WORKER"
FIRST_WORKER = "w0"
_WORKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

# A fixed namespace keeps task ids derived from rollout ids identical on every machine.
_TASK_NAMESPACE = uuid.UUID("7b1f3c2e-5d4a-4e8b-9c6f-2a1d0e9b8c7f")


def item_fingerprint(item: Any) -> str:
    """A short content hash of a dataset item (canonical JSON; falls back to repr)."""
    try:
        text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=repr)
    except (TypeError, ValueError):
        text = repr(item)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def rollout_id_for(item: Any, occurrence: int, slot: int, *, prefix: str = "train",
                   worker: str | None = None) -> str:
    """Stable id: ``{prefix}-{item hash}-{occurrence}-{slot}``, e.g. ``train-3fa2c1d09b7e-0-2``;
    ``@{worker}`` appended for every worker but the first (``w0``)."""
    base = f"{prefix}-{item_fingerprint(item)}-{occurrence}-{slot}"
    return base if worker in (None, FIRST_WORKER) else f"{base}@{worker}"


def worker_from_environment() -> str | None:
    """The identity given to this worker (``HERMES_REPLAY_WORKER``), or None."""
    name = os.environ.get(WORKER_VARIABLE, "").strip()
    if not name:
        return None
    if not _WORKER_NAME.fullmatch(name):
        raise ValueError(f"{WORKER_VARIABLE}={name!r} is no worker name: use 1-64 letters, "
                         "digits, '_', '.' or '-' (e.g. w0, w1 …)")
    return name


def worker_from_registration(assigned: str | None, desired: str | None) -> str | None:
    """``w<k>`` from the name the trajectory API gave this worker at ``/register-env``
    (atroposlib answers ``<desired name>_<k>``, k counting same-named workers from 0)."""
    if not assigned or not desired or not assigned.startswith(desired + "_"):
        return None
    index = assigned[len(desired) + 1:]
    return f"w{int(index)}" if index.isdigit() else None


def task_id_for(rollout_id: str) -> str:
    """Deterministic sandbox/task id for a rollout, so prompts and tool output match on replay."""
    return str(uuid.uuid5(_TASK_NAMESPACE, rollout_id))
