"""Stop a replay that makes no progress, with a clear error instead of a hang.

A replay that misses can loop: an env or library that retries a failed request forever, a
poll the cassette never recorded. Offline nothing ever changes, so after ``max_misses``
misses with no request answered from the cassette in between, or ``idle_seconds`` after a
miss with no answered request since, the run is stopped: a watchdog thread interrupts the
main thread (as Ctrl-C would, so ``finally`` blocks and sandbox cleanup run), and the
interrupt is turned into ``ReplayStalled`` naming the cassette, the count and the last miss.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hermes_replay._errors import HermesReplayError
from hermes_replay._runner.watchdog import watchdog

__all__ = ["DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_MISSES", "ReplayStalled", "stall_guard"]

DEFAULT_MAX_MISSES = 25
DEFAULT_IDLE_SECONDS = 120.0


class ReplayStalled(HermesReplayError):
    """Replay stopped: requests kept missing the cassette and nothing made progress."""


class _Progress:
    """The stall condition, polled by the watchdog thread; ``check`` returns why, once stuck.

    ``check`` reads plain counters only, never anything behind the session's lock: a replay
    that keeps missing holds that lock for most of each miss (matching, the nearest diff) and
    retakes it at once, so a watchdog waiting on it could starve for seconds — long enough for
    an env's retry loop to run thousands of misses (seen in CI: 10,000 unstopped). The last
    miss is named on the main thread, once the run is interrupted."""

    def __init__(self, session: Any, max_misses: int, idle_seconds: float) -> None:
        self.session = session
        self.max_misses = max_misses
        self.idle_seconds = idle_seconds
        self.answered, self.misses = self._now()
        self.since_miss: float | None = None

    def _now(self) -> tuple[int, int]:
        return int(getattr(self.session, "answered", 0)), int(self.session.miss_events)

    def check(self) -> str | None:
        answered, misses = self._now()
        if answered != self.answered:  # progress: start counting afresh
            self.answered, self.misses, self.since_miss = answered, misses, None
            return None
        if misses - self.misses >= self.max_misses:
            return f"{misses - self.misses} requests in a row had no recording"
        if misses > self.misses:  # a miss since the last progress: the deadline runs from it
            if self.since_miss is None:
                self.since_miss = time.monotonic()
            elif time.monotonic() - self.since_miss > self.idle_seconds:
                return (f"no request was answered from the cassette for "
                        f"{self.idle_seconds:.0f} s after a miss")
        return None


def _stalled(session: Any, reason: str) -> ReplayStalled:
    """The error of a stalled replay (built on the main thread, after the interrupt): the
    misses themselves, with their diffs, come with it — the guard stops the run before any
    other report would show them. The rollout named first is one the cassette holds (a miss
    whose nearest recording is its own turn): once a group misses, an env may draw items the
    recording never had, and those later misses name rollouts no one can look up."""
    from hermes_replay._errors import miss_text

    recorded = list(session.misses)

    def own_recording(miss: Any) -> bool:
        return miss.nearest is not None and miss.nearest[0] == miss.rollout

    ordered = sorted(recorded, key=lambda m: not own_recording(m))  # stable: order kept
    first = f"; the first: {ordered[0].headline()}" if ordered else ""
    hint = ("  next step: the first miss above is the cause to look at; if the change is "
            "intended, re-record (`hermes-replay record …`), or raise the bound with "
            "--max-misses")
    report = miss_text(ordered, None, hint, shown=3, verbose=False,
                       more="; -v on a replay of this one cassette shows every diff")
    return ReplayStalled(
        f"{session.path}: replay stopped — {reason}{first}. Offline nothing changes, so "
        f"it would never finish.\n{report}")


@contextmanager
def stall_guard(session: Any, *, max_misses: int = DEFAULT_MAX_MISSES,
                idle_seconds: float = DEFAULT_IDLE_SECONDS) -> Iterator[None]:
    """Watch ``session`` (a replay) while the block runs; see the module docstring.

    Only where Ctrl-C works as usual (``_runner.watchdog``: main thread, Python's default
    SIGINT handler); a SIGINT that arrives after the block ended is ignored."""
    if getattr(session, "mode", None) != "replay" or max_misses <= 0:
        yield
        return

    progress = _Progress(session, max_misses, idle_seconds)
    watchers = getattr(session, "miss_watchers", [])
    with watchdog(progress.check, error=lambda reason: _stalled(session, reason),
                  name="hermes-replay-stall-guard", interval=0.2) as poke:
        watchers.append(poke)  # the count trips at the miss itself, not at a tick
        try:
            yield
        finally:
            watchers.remove(poke)
