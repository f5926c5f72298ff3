"""Stop a recording whose endpoint does not answer, at once and naming it, instead of retrying.

Against a server that is down, every request fails to connect, and three retry layers (the
openai SDK's, atroposlib's tenacity, the env's own) try again with backoff for each rollout:
the probe saw 216 failed attempts over 77 s, then "4 rollouts recorded". Nothing recorded
against a dead endpoint is worth waiting for, so a watchdog reads the session's ``live``
counts (``_session.liveness``) and stops the run when ``max_unanswered`` requests in a row could
not connect (refused, unreachable, connect timed out), or when the first request got none within
``first_answer_timeout`` seconds (a port that accepts and never answers). It interrupts the
main thread as Ctrl-C would (``finally`` blocks and sandbox cleanup run, the previous cassette
is kept), and the interrupt becomes ``RecordingFailed`` naming the endpoint and the next step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hermes_replay._errors import HermesReplayError, LiveCallsFailed, RecordingFailed
from hermes_replay._runner.watchdog import watchdog

__all__ = ["DEFAULT_FIRST_ANSWER_TIMEOUT", "DEFAULT_MAX_UNANSWERED", "dead",
           "dead_endpoint_guard"]

DEFAULT_MAX_UNANSWERED = 6  # a couple of rollouts' SDK retries: a blip recovers before this
DEFAULT_FIRST_ANSWER_TIMEOUT = 120.0


def _where(url: str) -> str:
    """The endpoint a request went to, without credentials or the request's own path."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    path = parts.path
    for suffix in ("/chat/completions", "/completions", "/generate"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _unanswered(live: Any, max_unanswered: int, first_answer_timeout: float
                ) -> tuple[str, bool] | None:
    """Why the endpoint counts as dead (and whether it was the first-answer timeout), or None."""
    where = _where(live.last_url) if live.last_url else "the endpoint"
    if max_unanswered > 0 and live.unanswered_in_a_row >= max_unanswered:
        return (f"{where} did not answer: {live.unanswered_in_a_row} requests in a row could "
                f"not connect ({live.last_error})", False)
    if (first_answer_timeout > 0 and live.answers == 0 and live.first_sent is not None
            and time.monotonic() - live.first_sent > first_answer_timeout):
        return (f"{where} sent no answer in {first_answer_timeout:.0f} s (the first request "
                "is still waiting)", True)
    return None


def dead(session: Any, trip: tuple[str, bool]) -> HermesReplayError:
    """The error of a dead endpoint (built on the main thread, after the interrupt): a
    recording's, or the live endpoint of a replay that re-scores (``live_calls``)."""
    from hermes_replay._secrets.redact import redact_text

    reason, timed_out = trip
    curl = f"`curl {_where(session.live.last_url) or 'URL'}/models`"
    if getattr(session, "live_calls", None) is not None:
        slow = (" (or, if the judge really takes longer, raise --live-timeout SECONDS)"
                if timed_out else "")
        return LiveCallsFailed(redact_text(
            f"the live endpoint: {reason}; the run was stopped instead of scoring without "
            "it"), cassette=session.path, hint=redact_text(
            "check that the server is running and that --live-base-url names it (e.g. "
            f"{curl}), then replay again{slow}"))
    nothing = "nothing was recorded" if session.live.answers == 0 else \
        "it had answered before"
    hint = ("if the model really takes longer for a first reply, pass "
            "--first-answer-timeout SECONDS (0: no limit)" if timed_out else
            "check that the server is running and that --endpoint names it")
    return RecordingFailed(redact_text(
        f"{reason}; {nothing}, so the run was stopped instead of retrying.\n"
        f"  next step: {hint} (e.g. {curl}), then record again"), cassette=session.path)


@contextmanager
def dead_endpoint_guard(session: Any, *, max_unanswered: int = DEFAULT_MAX_UNANSWERED,
                        first_answer_timeout: float = DEFAULT_FIRST_ANSWER_TIMEOUT
                        ) -> Iterator[None]:
    """Watch a recording ``session`` while the block runs; see the module docstring.

    As ``stall_guard``: only where Ctrl-C works as usual (``_runner.watchdog``); a SIGINT that
    arrives after the block ended is ignored."""
    if getattr(session, "mode", None) not in ("record", "auto") \
            and getattr(session, "live_calls", None) is None:
        yield  # a plain replay reaches no endpoint; one that re-scores reaches its live one
        return
    live = session.live
    calls = getattr(session, "live_calls", None)

    def check() -> tuple[str, bool] | None:
        # a replay's live call that answered before and then hangs: its own deadline
        late = calls.overdue() if calls is not None else None
        if late is not None:
            return late, True
        # a live judge's first call is bounded by its own deadline (``--live-timeout``), so a
        # judge given 600 s is not stopped at the recording's first-answer limit
        return _unanswered(live, max_unanswered,
                           first_answer_timeout if calls is None else 0)

    with watchdog(check,
                  error=lambda trip: dead(session, trip), name="hermes-replay-dead-endpoint",
                  interval=0.1) as poke:
        live.watchers.append(poke)  # the count trips at the failed request, not at a tick
        try:
            yield
        finally:
            live.watchers.remove(poke)
