"""Rollout and task identity: the environment layer's rule, the same on every machine.

A cassette finds a rollout's recordings by its id, so the id must be the same when recording
and when replaying: it is made from the item's content, how many times that item has been drawn
so far, and the group slot — never from a uuid or a clock. The task id (the sandbox's name,
which tools may print into prompts) is derived from the rollout id for the same reason.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

__all__ = ["item_fingerprint", "rollout_id_for", "task_id_for"]

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


def rollout_id_for(item: Any, occurrence: int, slot: int, *, prefix: str = "train") -> str:
    """Stable id: ``{prefix}-{item hash}-{occurrence}-{slot}``, e.g. ``train-3fa2c1d09b7e-0-2``."""
    return f"{prefix}-{item_fingerprint(item)}-{occurrence}-{slot}"


def task_id_for(rollout_id: str) -> str:
    """Deterministic sandbox/task id for a rollout, so prompts and tool output match on replay."""
    return str(uuid.uuid5(_TASK_NAMESPACE, rollout_id))
