"""Interception: one seam per client library, installed only while a cassette is active.

- httpx  — ``HTTPTransport.handle_request`` / ``AsyncHTTPTransport.handle_async_request``
- httpx2 — the same two methods (the openai 3.x SDK runs on httpx2)
- aiohttp — ``ClientSession._request`` (atroposlib's vLLM/SGLang ``/generate``)

Adapters translate their library's request into a ``WireRequest`` and ask the active
``Handler`` (the cassette session) what to do; the handler never sees a library type.
Installation is reference counted: the first active cassette patches, the last one to
leave restores the originals. Nothing is patched at import time.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = ["Exchange", "Handler", "WireRequest", "WireResponse", "activate", "current",
           "deactivate", "installed"]


@dataclass
class WireRequest:
    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class WireResponse:
    """A response as bytes: ``body`` for a plain one, ``chunks`` for an event stream."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes | None = None
    chunks: list[bytes] | None = None
    reason: str = ""

    @property
    def content(self) -> bytes:
        return self.body if self.body is not None else b"".join(self.chunks or [])


class Exchange(Protocol):
    """What to do with one intercepted request, and how to report how it went."""

    action: Literal["replay", "record", "passthrough"]
    response: WireResponse | None  # set for "replay"

    def finish(self, response: WireResponse) -> None: ...

    def fail(self, error: BaseException | None = None) -> None: ...


class Handler(Protocol):
    def wants(self, method: str, url: str) -> bool:
        """Cheap check (no body read): is this request the handler's business at all?"""

    def begin(self, request: WireRequest) -> Exchange: ...


@dataclass
class _State:
    lock: threading.RLock = field(default_factory=threading.RLock)
    handlers: list[Handler] = field(default_factory=list)
    installed: list[str] = field(default_factory=list)


_STATE = _State()
# The cassette opened in *this* context (thread / task) wins over one opened elsewhere, so
# two cassettes active at once in one process (two threads, two tasks) never swap traffic.
_CONTEXT: ContextVar[Handler | None] = ContextVar("hermes_replay_handler", default=None)
_TOKENS: dict[int, Token] = {}


def _adapters() -> list[tuple[str, object]]:
    from hermes_replay._intercept import _aiohttp, _httpx, _httpx2

    return [("httpx", _httpx), ("httpx2", _httpx2), ("aiohttp", _aiohttp)]


def activate(handler: Handler) -> None:
    """Make ``handler`` the active one (innermost wins); patch the libraries on first use."""
    with _STATE.lock:
        _STATE.handlers.append(handler)
        _TOKENS[id(handler)] = _CONTEXT.set(handler)
        if len(_STATE.handlers) == 1:
            for name, module in _adapters():
                if module.install():  # type: ignore[attr-defined]
                    _STATE.installed.append(name)


def deactivate(handler: Handler) -> None:
    with _STATE.lock:
        if handler in _STATE.handlers:
            _STATE.handlers.remove(handler)
        token = _TOKENS.pop(id(handler), None)
        if token is not None:
            try:
                _CONTEXT.reset(token)
            except ValueError:  # closed from another context: current() skips it anyway
                pass
        if not _STATE.handlers:
            for name, module in _adapters():
                if name in _STATE.installed:
                    module.uninstall()  # type: ignore[attr-defined]
            _STATE.installed.clear()


def current() -> Handler | None:
    handlers = _STATE.handlers
    mine = _CONTEXT.get()
    if mine is not None and mine in handlers:
        return mine
    return handlers[-1] if handlers else None


def installed() -> tuple[str, ...]:
    """Names of the libraries currently patched (for tests and diagnostics)."""
    return tuple(_STATE.installed)
