"""Reward parts: the named terms of a reward (``correct``, ``format`` …) kept beside its sum.

A 0.6/0.2/0.2 reward that moves from 1.0 to 0.4 says little; ``correct 1 → 0`` says what a
reviewer needs. A Hermes env's ``compute_reward`` may return ``(reward, {"correct": 1.0,
"format": 1.0})``; the parts are stored with the rollout's outcome (``parts``) and shown by
show, diff, snapshot text and the report. The reward stays the float the env returned: the
parts are not summed or checked against it (weights are the env's business).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_PARTS", "clean_parts", "parts_changes", "parts_text"]

MAX_PARTS = 24  # a reward's named terms kept (more is a log, not a breakdown)
_MAX_NAME = 40


def clean_parts(value: Any) -> dict[str, float] | None:
    """``value`` as ``{name: float}`` (names cut, finite numbers and bools only), or None."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, float] = {}
    for key, number in value.items():
        if isinstance(number, bool):
            number = float(number)
        if not isinstance(number, (int, float)) or not math.isfinite(number):
            continue
        out[" ".join(str(key).split())[:_MAX_NAME]] = float(number)
        if len(out) >= MAX_PARTS:
            break
    return out or None


def _num(value: float) -> str:
    return f"{value:.4g}"


def parts_text(parts: Mapping[str, float] | None) -> str:
    """``correct 1, format 0.2`` (empty without parts)."""
    return ", ".join(f"{k} {_num(v)}" for k, v in (parts or {}).items())


def parts_changes(a: Mapping[str, float] | None, b: Mapping[str, float] | None
                  ) -> dict[str, tuple[float | None, float | None]]:
    """Parts whose value differs (one side may lack a part), in name order."""
    a, b = a or {}, b or {}
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
            if a.get(k) is None or b.get(k) is None or abs(a[k] - b[k]) > 1e-9}
