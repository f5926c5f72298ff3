"""Traffic recorded besides LLM calls: HTTP APIs an environment's tools call during a rollout.

An environment tool that calls a web API (a search API, say) makes its results part of the
rollout: replaying the model's replies without them would ask the next question with other tool
output. ``recorded_endpoint(url_prefix)`` declares such an API; inside a cassette its POST
requests are then recorded with the rollout — scrubbed like LLM traffic (Authorization and key
headers, key-like parameters and body fields) — and answered from the cassette on replay, with
no network and no key. Declarations are process-wide and idempotent.

This works whether or not the tool call itself is answered from the cassette: with tools
replayed (the default) the HTTP calls are simply not made; with ``--tools execute`` the tool
runs again and its HTTP calls are answered from the recording.
"""

from __future__ import annotations

import threading

__all__ = ["TOOL_HTTP", "is_recorded_endpoint", "recorded_endpoint"]

#: ``Interaction.kind`` of a recorded tool HTTP call. When the tool call itself is answered from
#: the cassette (the default replay), these are not made again and are not "unused".
TOOL_HTTP = "tool_http"

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
