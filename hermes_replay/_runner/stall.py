"""Stop a replay that makes no progress, with a clear error instead of a hang.

A replay that misses can loop: an env or library that retries a failed request forever, a
poll the cassette never recorded. Offline nothing ever changes, so after ``max_misses``
misses with no request answered from the cassette in between, or ``idle_seconds`` after a
miss with no answered request since, the run is stopped: a watchdog thread interrupts the
main thread (as Ctrl-C would, so ``finally`` blocks and sandbox cleanup run), and the
interrupt is turned into ``ReplayStalled`` naming the cassette, the count and the last miss.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hermes_replay._errors import HermesReplayError

__all__ = ["DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_MISSES", "ReplayStalled", "stall_guard"]

DEFAULT_MAX_MISSES = 25
DEFAULT_IDLE_SECONDS = 120.0


class ReplayStalled(HermesReplayError):
    """Replay stopped: requests kept missing the cassette and nothing made progress."""


class _Watch:
    def __init__(self, session: Any, max_misses: int, idle_seconds: float) -> None:
        self.session = session
        self.max_misses = max_misses
        self.idle_seconds = idle_seconds
        self.reason: str | None = None
        self.stop = threading.Event()
        self.main = threading.main_thread().ident

    def _progress(self) -> tuple[int, int]:
        return int(getattr(self.session, "answered", 0)), int(self.session.miss_events)

    def run(self) -> None:
        answered, misses = self._progress()
        since_miss: float | None = None
        while not self.stop.wait(0.2):
            now_answered, now_misses = self._progress()
            if now_answered != answered:
                answered, misses, since_miss = now_answered, now_misses, None
                continue
            if now_misses == misses:
                if since_miss is not None and time.monotonic() - since_miss > self.idle_seconds:
                    self._trip(f"no request was answered from the cassette for "
                               f"{self.idle_seconds:.0f} s after a miss")
                continue
            since_miss = time.monotonic()
            if now_misses - misses >= self.max_misses:
                self._trip(f"{now_misses - misses} requests in a row had no recording")

    def _trip(self, reason: str) -> None:
        if self.reason is None:
            misses = self.session.misses
            last = f"; the last: {misses[-1].describe().splitlines()[0]}" if misses else ""
            self.reason = reason + last
        if self.main is not None:  # again every tick until the run ends: a loop may swallow one
            signal.pthread_kill(self.main, signal.SIGINT)


@contextmanager
def stall_guard(session: Any, *, max_misses: int = DEFAULT_MAX_MISSES,
                idle_seconds: float = DEFAULT_IDLE_SECONDS) -> Iterator[None]:
    """Watch ``session`` (a replay) while the block runs; see the module docstring.

    Only where Ctrl-C works as usual (main thread, Python's default SIGINT handler): the
    interrupt is sent as SIGINT, and a handler of ours ignores any that arrives after the
    block ended, so a late one can never interrupt the caller.
    """
    if getattr(session, "mode", None) != "replay" or max_misses <= 0 \
            or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler \
            or os.name != "posix":
        yield
        return
    watch = _Watch(session, max_misses, idle_seconds)

    def on_sigint(signum: int, frame: Any) -> None:
        if not watch.stop.is_set():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    thread = threading.Thread(target=watch.run, name="hermes-replay-stall-guard", daemon=True)
    thread.start()
    try:
        yield
    except KeyboardInterrupt:
        if watch.reason is None:
            raise
        raise ReplayStalled(
            f"{session.path}: replay stopped — {watch.reason}. Offline nothing changes, so "
            "it would never finish.\n  next step: see the misses above; re-record what is "
            "missing (`hermes-replay record …`), or raise the bound with --max-misses"
        ) from None
    finally:
        watch.stop.set()
        thread.join()
        signal.signal(signal.SIGINT, previous)
