"""Whether a recording's endpoint answers at all: the counts a dead-endpoint guard reads.

A recording against a server that is down (connections refused, or a port that never answers)
used to run every rollout through every retry layer — the SDK's, atroposlib's, the env's — for
over a minute, then report "4 rollouts recorded". The session counts, per live request, whether
an HTTP answer came back; ``_runner.dead_endpoint`` stops the run from these counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Liveness", "is_unanswered"]

# exception class names (anywhere in the MRO) that mean no connection could be made: refused,
# unreachable, or the connect itself timed out (httpx/httpx2 and aiohttp). A connection the
# server dropped or a slow reply is a server that is there: those count as answers-to-come
# (a fault-injecting test endpoint drops on purpose), and the first-answer deadline covers a
# server that accepts and never replies.
_UNANSWERED = frozenset({
    "ConnectError", "ConnectTimeout", "ClientConnectorError", "ConnectionTimeoutError",
    "ConnectionRefusedError",
})

def is_unanswered(error: BaseException | None) -> bool:
    """True when ``error`` means no connection to the endpoint could be made."""
    if error is None:
        return False
    return any(kind.__name__ in _UNANSWERED for kind in type(error).__mro__)


@dataclass
class Liveness:
    """Live answers of one recording session (thread-safe; written by the request path)."""

    answers: int = 0  # HTTP responses that came back, errors (4xx/5xx) included
    unanswered_in_a_row: int = 0  # requests that could not connect, since the last answer
    last_url: str = ""
    last_error: str = ""
    first_sent: float | None = None  # time.monotonic() of the first live request
    # called after each unanswered request (the dead-endpoint guard's poke, ``_runner.watchdog``)
    watchers: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sent(self, url: str) -> None:
        with self._lock:
            if self.first_sent is None:
                self.first_sent = time.monotonic()
            self.last_url = self.last_url or url

    def answered(self) -> None:
        with self._lock:
            self.answers += 1
            self.unanswered_in_a_row = 0

    def unanswered(self, url: str, error: BaseException) -> None:
        with self._lock:
            self.unanswered_in_a_row += 1
            self.last_url, self.last_error = url, type(error).__name__
        for watcher in self.watchers:
            watcher()
