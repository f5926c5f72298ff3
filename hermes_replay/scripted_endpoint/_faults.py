"""Fault injection for the scripted endpoint: 5xx answers, timeouts, dropped connections.

Faults are decided per request, in arrival order, by a ``random.Random`` of their own (seeded by
``FaultPlan.seed``), so they never change *what* the script answers — only whether it answers.
``ScriptedEndpoint.fail_next(count, kind)`` schedules exact faults ahead of the random ones.

Kinds:
  ``5xx``     — answer 500 or 503 with an OpenAI-style JSON error body.
  ``timeout`` — hold the request ``timeout_s`` seconds (longer than the client's timeout), then
                answer normally (a client that waited that long gets a valid answer).
  ``drop``    — close the connection without sending a response.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

FAULT_KINDS = ("5xx", "timeout", "drop")
# Health and model listing are never faulted by default: vLLM clients poll /health and a plan
# meant to break generations should not also mark the server unhealthy.
DEFAULT_FAULT_PATHS = ("/v1/chat/completions", "/v1/completions", "/generate")


@dataclass(frozen=True)
class FaultPlan:
    """Random faults: each eligible request fails with probability ``rate``."""

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    paths: tuple[str, ...] | None = None
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        check_kinds(self.kinds)
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"FaultPlan.rate must be within [0, 1], got {self.rate}")


def check_kinds(kinds: Iterable[str]) -> None:
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad:
        raise ValueError(
            f"unknown fault kind(s) {bad}; choose from {', '.join(FAULT_KINDS)}"
        )


class FaultInjector:
    """Thread-safe: decides the fault (or None) for each request."""

    def __init__(self, plan: FaultPlan | None) -> None:
        self.plan = plan or FaultPlan()
        self._rng = random.Random(f"faults:{self.plan.seed}")
        self._scheduled: deque[str] = deque()
        self._lock = threading.Lock()
        self.injected = 0

    def schedule(self, count: int, kind: str) -> None:
        check_kinds([kind])
        with self._lock:
            self._scheduled.extend([kind] * count)

    def reset(self) -> None:
        with self._lock:
            self._scheduled.clear()
            self._rng = random.Random(f"faults:{self.plan.seed}")
            self.injected = 0

    def decide(self, path: str) -> str | None:
        paths = self.plan.paths if self.plan.paths is not None else DEFAULT_FAULT_PATHS
        if path not in paths:
            return None
        with self._lock:
            if self._scheduled:
                kind: str | None = self._scheduled.popleft()
            elif self.plan.rate > 0 and self._rng.random() < self.plan.rate:
                kind = self._rng.choice(self.plan.kinds)
            else:
                kind = None
            if kind is not None:
                self.injected += 1
            return kind
