"""Capture what an environment would send to Weights & Biases: no account, no network.

atroposlib calls the module functions ``wandb.init`` / ``wandb.log`` directly (and
``process``/``evaluate`` force ``use_wandb=True``), so the seam is those module
attributes, swapped only inside ``capture_wandb()``. Captured values are made plain
(numbers, strings, table summaries) so tests and snapshots can compare them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LoggedStep", "WandbCapture", "capture_wandb"]


@dataclass(frozen=True)
class LoggedStep:
    step: int | None
    metrics: dict[str, Any]


@dataclass
class WandbCapture:
    """Everything logged while the capture was active, in call order."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    steps: list[LoggedStep] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def latest(self, prefix: str = "") -> dict[str, Any]:
        """The last value of every metric (optionally only keys starting with ``prefix``)."""
        merged: dict[str, Any] = {}
        for logged in self.steps:
            for key, value in logged.metrics.items():
                if key.startswith(prefix):
                    merged[key] = value
        return dict(sorted(merged.items()))

    def history(self, key: str) -> list[Any]:
        """Every logged value of one metric, in order."""
        return [s.metrics[key] for s in self.steps if key in s.metrics]

    def _log(self, metrics: dict[str, Any] | None, step: int | None) -> None:
        with self._lock:
            self.steps.append(LoggedStep(step, _plain_dict(metrics or {})))


class _Run:
    """The object ``wandb.init`` returns inside a capture; enough for env code."""

    def __init__(self, capture: WandbCapture, kwargs: dict[str, Any]) -> None:
        self._capture = capture
        self.name = kwargs.get("name")
        self.project = kwargs.get("project")
        self.config = dict(kwargs.get("config") or {})

    def log(self, metrics: dict[str, Any] | None = None, step: int | None = None, **_: Any) -> None:
        self._capture._log(metrics, step)

    def finish(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@contextmanager
def capture_wandb() -> Iterator[WandbCapture]:
    """Swap ``wandb.init``/``log``/``finish`` for recorders for the duration of the block."""
    import wandb  # heavy import: only paid by callers that capture

    capture = WandbCapture()
    saved = {name: getattr(wandb, name, None) for name in ("init", "log", "finish", "run")}

    def init(*args: Any, **kwargs: Any) -> _Run:
        run = _Run(capture, kwargs)
        with capture._lock:
            # The config can hold the API key (atroposlib passes config.model_dump()).
            capture.runs.append({"name": run.name, "project": run.project,
                                 "config_keys": sorted(run.config)})
        # Code that checks ``wandb.run`` (as the base env does) must see an active run.
        wandb.run = run
        return run

    def log(metrics: dict[str, Any] | None = None, step: int | None = None, **_: Any) -> None:
        capture._log(metrics, step)

    wandb.init = init
    wandb.log = log
    wandb.finish = lambda *a, **k: None
    try:
        yield capture
    finally:
        for name, original in saved.items():
            if original is not None or name == "run":
                setattr(wandb, name, original)


def _plain(value: Any) -> Any:
    """Numbers, strings, lists, dicts; wandb objects become small summaries."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return _plain(value.item())
        except (TypeError, ValueError):
            pass
    if isinstance(value, dict):
        return _plain_dict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    columns = getattr(value, "columns", None)
    data = getattr(value, "data", None)
    if columns is not None and data is not None:  # wandb.Table
        return {"_type": "table", "columns": list(columns), "rows": len(data)}
    return {"_type": type(value).__name__}


def _plain_dict(metrics: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _plain(v) for k, v in metrics.items()}
