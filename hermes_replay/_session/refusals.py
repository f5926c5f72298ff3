"""Requests the endpoint refused (HTTP 4xx) during a recording, with the endpoint's reason.

An env that catches the error of a refused request (many community envs wrap the call in
``try: … except Exception: return None``) turns 228 answers of 422 into empty groups, and the
run then fails far from the cause ("every group dropped: a length filter?"). The session counts
each refusal by status, keeps the first one's request line and the reason the endpoint gave
(``error.message``, FastAPI's ``detail``, or the start of the text; scrubbed), and a failed
recording names them first.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

from hermes_replay._secrets.redact import redact_text

__all__ = ["Refusals"]

_REASON_CHARS = 400


def _reason(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        for candidate in (error.get("message") if isinstance(error, dict) else error,
                          data.get("detail"), data.get("message")):
            if candidate:
                text = candidate if isinstance(candidate, str) else json.dumps(candidate)
                break
    text = " ".join(redact_text(text).split())
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 1] + "…"


@dataclass
class _Seen:
    count: int
    request: str  # "POST <url>" of the first one
    reason: str


@dataclass
class Refusals:
    """Refused requests of one session, by status (thread-safe)."""

    by_status: dict[int, _Seen] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, status: int, method: str, url: str, body: bytes) -> None:
        if not 400 <= status < 500:
            return
        with self._lock:
            seen = self.by_status.get(status)
            if seen is None:
                self.by_status[status] = _Seen(1, f"{method} {redact_text(url)}", _reason(body))
            else:
                seen.count += 1

    def lines(self) -> list[str]:
        """One line per status, most frequent first (empty: nothing was refused)."""
        with self._lock:
            seen = sorted(self.by_status.items(), key=lambda kv: -kv[1].count)
        return [f"the endpoint refused {s.count} request(s) with HTTP {status} (the first: "
                f"{s.request}): {s.reason or 'no reason given'}" for status, s in seen]
