"""Traffic recorded besides LLM calls: HTTP APIs an environment's tools call during a rollout.

An environment tool that calls a web API (a search API, say) makes its results part of the
rollout: replaying the model's replies without them would ask the next question with other tool
output. ``recorded_endpoint(url_prefix)`` declares such an API; inside a cassette its POST
requests are then recorded with the rollout — scrubbed like LLM traffic (Authorization and key
headers, key-like parameters and body fields) — and answered from the cassette on replay, with
no network and no key. Declarations are process-wide and idempotent.
"""

from __future__ import annotations

import threading

__all__ = ["is_recorded_endpoint", "recorded_endpoint"]

_PREFIXES: set[str] = set()
_LOCK = threading.Lock()


def recorded_endpoint(url_prefix: str) -> None:
    """Record/replay POST requests whose URL starts with ``url_prefix`` (scheme and host included,
    e.g. ``"https://api.tavily.com/"``) like LLM traffic, inside any cassette."""
    if not url_prefix.startswith(("http://", "https://")):
        raise ValueError(f"recorded_endpoint needs an http(s) URL prefix, not {url_prefix!r}")
    with _LOCK:
        _PREFIXES.add(url_prefix)


def is_recorded_endpoint(url: str) -> bool:
    return any(url.startswith(prefix) for prefix in _PREFIXES)
