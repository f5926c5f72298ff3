"""Terminal output of the CLI, drawn by rich: colors, tables and the live progress bar.

On a terminal, tables get a header rule and bold headers, and a run shows a progress bar. When
the output is a file or a pipe (CI logs, scripts, tests), the same content comes out as plain
ASCII: no escape codes, nothing wrapped or cut, columns two spaces apart, one progress line
every few seconds. ``NO_COLOR`` turns colors off on a terminal too. ``ls``, ``show``,
``diff``, ``verify`` and the run commands render through this module, so the two forms stay
alike (``check`` and ``probe`` print their own report text).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich import box
from rich.color import ColorSystem
from rich.console import Console
from rich.file_proxy import FileProxy
from rich.progress import BarColumn, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.style import Style as RichStyle
from rich.table import Column, Table
from rich.text import Text

__all__ = ["Progress", "Style", "fmt_reward", "sanitize", "shown_path", "table", "truncate"]

# Without a terminal nothing may wrap: a folded rollout id would break every grep.
_NO_WRAP_WIDTH = 100_000
# The plain form's only rule: one ASCII line under the header (a box of spaces otherwise).
_PLAIN_BOX = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


class Style:
    """Colors that switch themselves off when the stream is not a terminal or NO_COLOR is set.

    ``style(text, "bold", "red")`` returns ``text`` with rich's ANSI codes, or ``text`` itself.
    ``terminal`` says whether the stream is one (tables are drawn for a screen then).
    """

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        stream = sys.stdout if stream is None else stream
        self.terminal = _isatty(stream) if color is None else color
        self.color = (self.terminal and "NO_COLOR" not in os.environ) if color is None else color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        return RichStyle.parse(" ".join(styles)).render(text, color_system=ColorSystem.STANDARD)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown_path(path: Path) -> str:
    """``path`` as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


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


def _console(file: TextIO, *, terminal: bool, color: bool, width: int | None = None) -> Console:
    return Console(file=file, force_terminal=terminal, no_color=not color, width=width,
                   color_system="standard" if color else None, highlight=False, markup=False,
                   emoji=False, legacy_windows=False, force_jupyter=False)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    style: Style | None = None,
) -> str:
    """A table as text. ``align`` has one of ``l``/``r`` per column; cells may carry colors
    from ``style`` (they count by their visible width). Plain unless ``style`` is a terminal's:
    then a rich table fitted to the terminal's width (long cells fold, never vanish)."""
    terminal = bool(style and style.terminal)
    color = bool(style and style.color)
    align = align or "l" * len(headers)
    grid = Table(box=box.SIMPLE_HEAD if terminal else _PLAIN_BOX, show_edge=False,
                 pad_edge=False, padding=(0, 1, 0, 0), header_style="bold" if color else "",
                 safe_box=not terminal)
    for header, side in zip(headers, align, strict=True):
        grid.add_column(header, justify="right" if side == "r" else "left", overflow="fold")
    for row in rows:
        grid.add_row(*(Text.from_ansi("" if cell is None else str(cell)) for cell in row))
    out = io.StringIO()
    width = shutil.get_terminal_size().columns if terminal else _NO_WRAP_WIDTH
    _console(out, terminal=terminal, color=color, width=width).print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


class _Counts(ProgressColumn):
    """``3/12 rollouts · 6 turns · 1 misses`` from the run's own counters (misses in red)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self._progress = progress

    def render(self, task: Any) -> Text:
        text = Text(self._progress.counts(), no_wrap=True, overflow="ellipsis")
        if self._progress.state()[2]:
            text.highlight_regex(r"\d+ misses", "red")
        return text


class Progress:
    """Progress while an environment runs: a rich progress bar on a terminal (the cassette's
    rollout total, once known, is the bar's end), a plain line every ``interval`` seconds
    otherwise.

    Fed by rollout-finished notifications and the session's events (``loaded``/``hit``/
    ``record``/``miss``); ``miss_count``, if set, overrides the miss counter (for a core
    without events). ``start()`` begins refreshing (rich's own refresh on a terminal, a ticker
    thread otherwise) so the display stays alive while the env is quiet; ``above(stream)`` is
    where the env's own output goes on a terminal so it scrolls above the bar.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        label: str = "",
        interval: float = 5.0,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "rollouts",
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.unit = unit  # what the bar counts: rollouts of one run, cassettes of `-j`
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
        self._started = clock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._bar: RichProgress | None = None
        self._task: Any = None

    def rollout_done(self, rollout_id: str, outcome: dict[str, Any]) -> None:
        with self._lock:
            self.rollouts += 1
            self.turns += int(outcome.get("turns_used") or 0)
        self._update()

    def item_done(self, *, turns: int = 0, misses: int = 0) -> None:
        """One more of ``unit`` finished, with its turns and misses (``replay -j``: a
        cassette and its summary's counts)."""
        with self._lock:
            self.rollouts += 1
            self.turns += turns
            self.misses += misses
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

    def state(self) -> tuple[int, int, int]:
        """(rollouts done, turns, misses) as shown."""
        misses = self.miss_count() if self.miss_count is not None else self.misses
        return self.rollouts, max(self.turns, self.requests), misses

    def counts(self) -> str:
        rollouts, turns, misses = self.state()
        done = (f"{rollouts}/{self.total} {self.unit}" if self.total
                else f"{rollouts} {self.unit} done")
        return f"{done} · {turns} turns · {misses} misses"

    def text(self) -> str:
        """The plain progress line (without a terminal)."""
        prefix = f"{self.label}: " if self.label else ""
        return f"{prefix}{self.counts()} · {self.clock() - self._started:.0f}s"

    def _update(self, *, tick: bool = False) -> None:
        with self._lock:
            if self.tty:
                if self._bar is not None:  # rich redraws it on its own refresh
                    self._bar.update(self._task, completed=self.rollouts, total=self.total)
                return
            now = self.clock()
            state = self.state()
            if now - self._last < self.interval or (tick and state == self._last_state):
                return
            self._last, self._last_state = now, state
            self.stream.write("[hermes-replay] " + self.text() + "\n")
            self.stream.flush()

    def start(self) -> None:
        """Begin refreshing: the bar on a terminal, the periodic line's ticker otherwise."""
        if self._bar is not None or self._thread is not None:
            return
        if self.tty:
            color = "NO_COLOR" not in os.environ
            self._bar = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False,
                           table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
                BarColumn(bar_width=24), _Counts(self), TimeElapsedColumn(),
                console=_console(self.stream, terminal=True, color=color),
                expand=True, transient=True, redirect_stdout=False, redirect_stderr=False,
                refresh_per_second=4, get_time=self.clock)
            self._task = self._bar.add_task(self.label, total=self.total,
                                            completed=self.rollouts)
            self._bar.start()
            return
        self._stop = threading.Event()
        stop = self._stop

        def tick() -> None:
            while not stop.wait(self.interval):
                try:
                    self._update(tick=True)
                except Exception:  # the run matters more than its progress line
                    return

        self._thread = threading.Thread(target=tick, name="hermes-replay-progress", daemon=True)
        self._thread.start()

    def above(self, stream: TextIO) -> TextIO:
        """Where output meant for ``stream`` goes while the bar is shown: a terminal stream is
        printed above the bar (rich moves the bar down), anything else is left alone."""
        if self._bar is None or not _isatty(stream):
            return stream
        return FileProxy(self._bar.console, stream)  # type: ignore[return-value]

    def close(self) -> None:
        """Stop refreshing and remove the bar, so the summary starts on a clean line."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
