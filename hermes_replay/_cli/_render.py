"""Terminal output for the CLI: colors (only on a terminal, never with NO_COLOR), tables,
the progress line, and the end-of-run summary. Standard library only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

__all__ = [
    "Progress",
    "RunSummary",
    "Style",
    "fmt_reward",
    "table",
    "truncate",
]


class Style:
    """ANSI styling that switches itself off when the stream is not a TTY or NO_COLOR is set."""

    _CODES: ClassVar[dict[str, str]] = {
        "bold": "1",
        "dim": "2",
        "red": "31",
        "green": "32",
        "yellow": "33",
        "blue": "34",
        "magenta": "35",
        "cyan": "36",
    }

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        stream = sys.stdout if stream is None else stream
        if color is None:
            color = _isatty(stream) and "NO_COLOR" not in os.environ
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(self._CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def truncate(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut (0 if none)."""
    if limit <= 0 or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def fmt_reward(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    return f"{value:.3f}"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    style: Style | None = None,
) -> str:
    """A plain aligned text table. ``align`` has one of ``l``/``r`` per column."""
    body = [["" if c is None else str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    align = align or "l" * len(headers)

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(widths[i]) if align[i] == "r" else c.ljust(widths[i])
            for i, c in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    head = line(headers)
    out = [style(head, "bold") if style else head, "  ".join("-" * w for w in widths)]
    out += [line(r) for r in body]
    return "\n".join(out)


@dataclass
class RunSummary:
    """What ``record``/``replay``/``passthrough`` print at the end of one run."""

    mode: str
    cassette: str | None
    rollouts: int = 0
    turns: int = 0
    misses: int = 0
    unused: int = 0
    recorded: int = 0
    mean_reward: float | None = None
    changed: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    exit_code: int = 0
    error: str | None = None
    log: str | None = None  # where the env's own output went, if not to the terminal
    skipped: str | None = None  # why this cassette was not replayed (not a failure)

    def lines(self, style: Style) -> list[str]:
        what = {"record": "recorded", "replay": "replayed", "passthrough": "ran live"}.get(
            self.mode, self.mode
        )
        head = f"hermes-replay {self.mode}"
        if self.cassette:
            head += f" · {self.cassette}"
        parts = [f"{self.rollouts} rollouts {what}", f"{self.turns} turns"]
        if self.mode == "record":
            parts.append(f"{self.recorded} interactions written")
        if self.mode == "replay":
            parts.append(style(f"{self.misses} misses", "red") if self.misses else "0 misses")
            parts.append(
                style(f"{self.unused} unused recordings", "yellow")
                if self.unused
                else "0 unused recordings"
            )
        parts.append(f"mean reward {fmt_reward(self.mean_reward)}")
        if self.skipped:
            return [style(head, "bold"), "  " + style("skipped: ", "yellow") + self.skipped]
        out = [style(head, "bold"), "  " + " · ".join(parts)]
        for rid, (old, new) in sorted(self.changed.items()):
            out.append(
                "  " + style("reward changed", "yellow")
                + f" {rid}: {fmt_reward(old)} -> {fmt_reward(new)}"
            )
        if self.error:
            out.append("  " + style("error: ", "red") + self.error)
        if self.exit_code:
            out.append(f"  environment exit code {self.exit_code}")
        if self.log and (self.error or self.exit_code):
            out.append(f"  environment output: {self.log}")
        return out


class Progress:
    """Progress while an environment runs: one rewritten line on a TTY, periodic lines otherwise.

    Fed by rollout-finished notifications (and core events, when the session emits them);
    ``misses`` is read through ``miss_count`` so it reflects the session's own count.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        label: str = "",
        interval: float = 5.0,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.tty = _isatty(self.stream) if tty is None else tty
        self.label = label
        self.interval = interval
        self.clock = clock
        self.rollouts = 0
        self.turns = 0  # from finished rollouts' reports
        self.requests = 0  # LLM requests inside rollouts, from session events (live)
        self.misses = 0
        self.miss_count: Callable[[], int] | None = None
        self._last = clock()
        self._dirty = False
        self._started = clock()

    def rollout_done(self, rollout_id: str, outcome: dict[str, Any]) -> None:
        self.rollouts += 1
        self.turns += int(outcome.get("turns_used") or 0)
        self._update()

    def event(self, event: Any) -> None:
        """Core session events: a miss bumps the counter; anything else just refreshes."""
        kind = event.get("kind") if isinstance(event, dict) else getattr(event, "kind", None)
        rollout = event.get("rollout") if isinstance(event, dict) else getattr(
            event, "rollout", None)
        if kind == "miss":
            self.misses += 1
        elif kind in ("hit", "record") and rollout is not None:
            self.requests += 1
        self._update()

    def text(self) -> str:
        misses = self.miss_count() if self.miss_count is not None else self.misses
        elapsed = self.clock() - self._started
        prefix = f"{self.label}: " if self.label else ""
        turns = max(self.turns, self.requests)
        return (
            f"{prefix}{self.rollouts} rollouts done · {turns} turns · {misses} misses"
            f" · {elapsed:.0f}s"
        )

    def _update(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.text())
            self.stream.flush()
            self._dirty = True
            return
        now = self.clock()
        if now - self._last >= self.interval:
            self._last = now
            self.stream.write("[hermes-replay] " + self.text() + "\n")
            self.stream.flush()

    def close(self) -> None:
        """End the live line so the summary starts on a fresh line."""
        if self.tty and self._dirty:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._dirty = False
