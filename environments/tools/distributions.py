"""Toolset distributions: named weighted mixes, sampled once per group.

A distribution maps toolset → probability (0..1). Sampling includes each toolset independently
with its probability; if that picks nothing, the most likely toolset is taken, so a group always
has tools. ``--env.distribution NAME`` (exclusive with ``enabled_toolsets``) makes the base
environment sample once per group, seeded by the group's identity (item, occurrence, phase):
the same group gets the same toolsets in every run, so a replay asks the very requests that were
recorded. ``--env.distribution`` also accepts an inline JSON mix, e.g. ``'{"terminal": 1,
"web": 0.5}'``. ``disabled_toolsets`` is removed from every sample.

The built-in names follow the former Hermes layer's; mixes that need a toolset this layer does
not provide (``browser_tasks``) stop at startup with a message saying so.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["distributions", "get_distribution", "register_distribution", "sample_toolsets"]

_DISTRIBUTIONS: dict[str, Mapping[str, float]] = {}


def register_distribution(name: str, mix: Mapping[str, float]) -> None:
    """Add a named mix; duplicates and probabilities outside [0, 1] are refused."""
    if name in _DISTRIBUTIONS:
        raise ValueError(f"toolset distribution {name!r} is already registered")
    _DISTRIBUTIONS[name] = _checked(name, mix)


def _checked(name: str, mix: Mapping[str, float]) -> Mapping[str, float]:
    if not mix:
        raise ValueError(f"toolset distribution {name!r} is empty")
    for toolset, p in mix.items():
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
            raise ValueError(f"toolset distribution {name!r}: probability of {toolset!r} must "
                             f"be a number in [0, 1], not {p!r}")
    return MappingProxyType({str(k): float(v) for k, v in mix.items()})


def distributions() -> Mapping[str, Mapping[str, float]]:
    """Read-only view of every named distribution."""
    return MappingProxyType(_DISTRIBUTIONS)


def get_distribution(spec: str) -> Mapping[str, float]:
    """The mix named ``spec``, or an inline JSON object; ``ValueError`` naming the choices."""
    text = spec.strip()
    if text.startswith("{"):
        try:
            mix = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"--env.distribution is not valid JSON: {exc}") from None
        if not isinstance(mix, dict):
            raise ValueError("--env.distribution JSON must be an object toolset → probability")
        return _checked("inline", mix)
    try:
        return _DISTRIBUTIONS[text]
    except KeyError:
        raise ValueError(
            f"unknown toolset distribution {spec!r}; available: "
            f"{', '.join(sorted(_DISTRIBUTIONS))} (or an inline JSON mix) for --env.distribution"
        ) from None


def sample_toolsets(spec: str, group_key: str, disabled: set[str] | frozenset[str] = frozenset()
                    ) -> list[str]:
    """The toolsets of one group: a draw from ``spec`` seeded by ``group_key`` alone."""
    mix = {k: v for k, v in get_distribution(spec).items() if k not in disabled}
    if not mix:
        raise ValueError(f"toolset distribution {spec!r} has no toolset left after "
                         f"disabled_toolsets {sorted(disabled)}")
    seed = int.from_bytes(hashlib.sha256(f"{spec}\0{group_key}".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    chosen = [t for t in sorted(mix) if rng.random() < mix[t]]
    if not chosen:
        chosen = [max(sorted(mix), key=lambda t: mix[t])]
    return chosen


for _name, _mix in {
    "default": {"terminal": 1.0, "file": 1.0, "todo": 1.0, "web": 1.0},
    "research": {"web": 1.0, "file": 0.5, "todo": 0.5},
    "development": {"terminal": 1.0, "file": 1.0, "todo": 0.5, "web": 0.3},
    "terminal_only": {"terminal": 1.0},
    "terminal_web": {"terminal": 1.0, "web": 1.0},
    "terminal_tasks": {"terminal": 1.0, "file": 0.8, "todo": 0.3, "web": 0.2},
    "mixed_tasks": {"terminal": 0.7, "file": 0.7, "web": 0.5, "todo": 0.3},
    "browser_tasks": {"browser": 1.0, "web": 0.5},
}.items():
    register_distribution(_name, _mix)
