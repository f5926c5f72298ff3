"""Terminal output for the CLI: colors (only on a terminal, never with NO_COLOR), tables,
the progress line, and the end-of-run summary. Standard library only.
"""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

__all__ = [
    "LineClearingStream",
    "Progress",
    "RunSummary",
    "Style",
    "fmt_reward",
    "sanitize",
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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _visible_len(text: str) -> int:
    """Length on screen: ANSI color codes take no columns."""
    return len(_ANSI.sub("", text))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize(text: str) -> str:
    """Control characters from a cassette shown as ``\\xNN``: a model's (or a hostile
    cassette's) escape sequences must not move the cursor or recolor the reader's terminal.
    Newlines and tabs stay."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


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
            widths[i] = max(widths[i], _visible_len(cell))
    align = align or "l" * len(headers)

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i, c in enumerate(cells):
            pad = " " * (widths[i] - _visible_len(c))
            parts.append(pad + c if align[i] == "r" else c + pad)
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
    unused_keys: list[str] = field(default_factory=list)  # "rollout#turn" of unused recordings
    recorded: int = 0
    failed_attempts: int = 0  # record: requests that failed live and were not written
    mean_reward: float | None = None
    changed: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    exit_code: int = 0
    error: str | None = None
    log: str | None = None  # where the env's own output went, if not to the terminal
    rerecorded: dict[str, int] = field(default_factory=dict)  # auto: rollout -> turns recorded
    skipped: str | None = None  # why this cassette was not replayed (not a failure)
    tools_replayed: int = 0  # tool calls answered from the cassette (nothing executed)
    tools_executed: int = 0  # tool calls that really ran
    tool_drift: list[str] = field(default_factory=list)  # described drifts (--tools execute)
    other_workers: int = 0  # replay of one worker: recordings of the others, left to them

    def lines(self, style: Style) -> list[str]:
        what = {"record": "recorded", "replay": "replayed", "passthrough": "ran live",
                "auto": "run"}.get(self.mode, self.mode)
        head = f"hermes-replay {self.mode}"
        if self.cassette:
            head += f" · {self.cassette}"
        parts = [f"{self.rollouts} rollouts {what}", f"{self.turns} turns"]
        if self.mode in ("record", "auto"):
            parts.append(f"{self.recorded} interactions written")
        if self.mode == "replay":
            parts.append(style(f"{self.misses} misses", "red") if self.misses else "0 misses")
            parts.append(
                style(f"{self.unused} unused recordings", "yellow")
                if self.unused
                else "0 unused recordings"
            )
            if self.other_workers:
                parts.append(f"{self.other_workers} left to other workers")
        parts.append(f"mean reward {fmt_reward(self.mean_reward)}")
        if self.skipped:
            return [style(head, "bold"), "  " + style("skipped: ", "yellow") + self.skipped]
        out = [style(head, "bold"), "  " + " · ".join(parts)]
        if self.mode == "auto" and not self.error and not self.exit_code:
            from hermes_replay._summary import rerecorded_line

            out.append("  " + sanitize(rerecorded_line(self.rerecorded)))
        if self.unused_keys:
            shown = sanitize(", ".join(self.unused_keys[:5]))
            more = f" and {len(self.unused_keys) - 5} more" if len(self.unused_keys) > 5 else ""
            out.append(f"  unused: {shown}{more} (the run made fewer requests than recorded)")
        if self.mode == "replay" and (self.tools_replayed or self.tools_executed):
            out.append(f"  tool calls: {self.tools_replayed} answered from the cassette, "
                       f"{self.tools_executed} executed")
        if self.tool_drift:
            out.append("  " + style(f"{len(self.tool_drift)} tool result(s) drifted from the "
                                    "recording", "yellow") + " (fatal only with --strict):")
            for text in self.tool_drift[:5]:
                out.extend("  " + sanitize(line) for line in text.splitlines()[:14])
            if len(self.tool_drift) > 5:
                out.append(f"    … and {len(self.tool_drift) - 5} more")
        for rid, (old, new) in sorted(self.changed.items()):
            out.append(
                "  " + style("reward changed", "yellow")
                + f" {sanitize(rid)}: {fmt_reward(old)} -> {fmt_reward(new)}"
            )
        if self.mode == "record" and self.failed_attempts and not self.error:
            out.append("  " + style("warning: ", "yellow") + f"{self.failed_attempts} requests "
                       "failed live and were not written; the env may have scored those "
                       "rollouts as failures — check the endpoint and re-record if so")
        if self.error:
            out.append("  " + style("error: ", "red") + self.error)
        if self.exit_code:
            out.append(f"  environment exit code {self.exit_code}")
        if self.log and (self.error or self.exit_code):
            out.append(f"  environment output: {self.log}")
        return out


class Progress:
    """Progress while an environment runs: one rewritten line on a TTY, periodic lines otherwise.

    Fed by rollout-finished notifications and the session's events (``hit``/``record``/
    ``miss``); ``miss_count``, if set, overrides the miss counter (for a core without events).
    ``start()`` runs a ticker thread so the line stays alive while the env is quiet (startup,
    long tool calls); ``clear()`` lets env output print on a clean line.
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
        self.total: int | None = None  # rollouts in the cassette (replay/auto), once loaded
        self.miss_count: Callable[[], int] | None = None
        self._lock = threading.RLock()
        self._last = clock()
        self._last_state: tuple[int, int, int] | None = None
        self._dirty = False
        self._started = clock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def rollout_done(self, rollout_id: str, outcome: dict[str, Any]) -> None:
        with self._lock:
            self.rollouts += 1
            self.turns += int(outcome.get("turns_used") or 0)
        self._update()

    def event(self, event: Any) -> None:
        """A session event: a miss bumps the miss counter, a hit/record in a rollout a turn."""
        get = event.get if isinstance(event, dict) else lambda k: getattr(event, k, None)
        kind, rollout = get("kind"), get("rollout")
        with self._lock:
            if kind == "loaded":
                self.total = get("seq") or None
            elif kind == "miss":
                self.misses += 1
            elif kind in ("hit", "record") and rollout is not None:
                self.requests += 1
        self._update()

    def _state(self) -> tuple[int, int, int]:
        misses = self.miss_count() if self.miss_count is not None else self.misses
        return self.rollouts, max(self.turns, self.requests), misses

    def text(self) -> str:
        rollouts, turns, misses = self._state()
        elapsed = self.clock() - self._started
        prefix = f"{self.label}: " if self.label else ""
        done = f"{rollouts}/{self.total} rollouts" if self.total else f"{rollouts} rollouts done"
        return f"{prefix}{done} · {turns} turns · {misses} misses · {elapsed:.0f}s"

    def _update(self, *, tick: bool = False) -> None:
        with self._lock:
            if self.tty:
                self.stream.write("\r\033[K" + self.text())
                self.stream.flush()
                self._dirty = True
                return
            now = self.clock()
            state = self._state()
            if now - self._last < self.interval or (tick and state == self._last_state):
                return
            self._last, self._last_state = now, state
            self.stream.write("[hermes-replay] " + self.text() + "\n")
            self.stream.flush()

    def start(self) -> None:
        """Refresh in the background (every second on a TTY, every ``interval`` otherwise)."""
        if self._thread is not None:
            return
        self._stop = threading.Event()
        period = 1.0 if self.tty else self.interval
        stop = self._stop

        def tick() -> None:
            while not stop.wait(period):
                try:
                    self._update(tick=True)
                except Exception:  # the run matters more than its progress line
                    return

        self._thread = threading.Thread(target=tick, name="hermes-replay-progress", daemon=True)
        self._thread.start()

    def clear(self) -> None:
        """Wipe the live line (before other output); the next refresh redraws it."""
        with self._lock:
            if self.tty and self._dirty:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._dirty = False

    def close(self) -> None:
        """Stop refreshing and end the live line so the summary starts on a fresh line."""
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        self.clear()


class LineClearingStream(io.TextIOBase):
    """Wraps the terminal stream an env writes to so each write first wipes the progress line."""

    def __init__(self, stream: TextIO, progress: Progress) -> None:
        super().__init__()
        self._stream = stream
        self._progress = progress

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._progress.clear()
        self._stream.write(text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return _isatty(self._stream)

    def fileno(self) -> int:
        return self._stream.fileno()
