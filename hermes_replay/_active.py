"""Which cassette session is active *here*: the one place that answers it.

Interception, rollout outcome reports, ``annotate`` and the tokenizer check all ask
:func:`current`. A session is bound to the context (thread / asyncio task) that opened it, so two
cassettes open at once in one process — two threads, two tasks — never see each other's traffic
or events. A context that opened none (a worker thread the env started without copying its
context) falls back to the only active session in the process; with several active and none of
its own, it gets none rather than a guess; so does a context whose own session has ended.

This module imports nothing from the package, so every other module may import it.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from typing import Any, Protocol

__all__ = ["ActiveSession", "active_mode", "annotate", "current", "enter", "is_active", "leave",
           "sessions"]


class ActiveSession(Protocol):
    """What the rest of the package may ask of the active session."""

    mode: str

    def wants(self, method: str, url: str) -> bool: ...

    def begin(self, request: Any) -> Any: ...

    def rollout_finished(self, scope: Any) -> None: ...

    def annotate(self, fields: dict[str, Any]) -> None: ...


_LOCK = threading.Lock()
_ACTIVE: list[ActiveSession] = []
_CONTEXT: ContextVar[ActiveSession | None] = ContextVar("hermes_replay_session", default=None)
_TOKENS: dict[int, Token[ActiveSession | None]] = {}


def enter(session: ActiveSession) -> bool:
    """Bind ``session`` to this context; True when it is the first active one in the process."""
    with _LOCK:
        _ACTIVE.append(session)
        _TOKENS[id(session)] = _CONTEXT.set(session)
        return len(_ACTIVE) == 1


def leave(session: ActiveSession) -> bool:
    """Unbind ``session``; True when no session is active any more."""
    with _LOCK:
        if session in _ACTIVE:
            _ACTIVE.remove(session)
        token = _TOKENS.pop(id(session), None)
        if token is not None:
            try:
                _CONTEXT.reset(token)
            except ValueError:  # left from another context; current() ignores it anyway
                pass
        return not _ACTIVE


def current() -> ActiveSession | None:
    """This context's session while it is active; for a context that opened none, the
    process's only active one. A context whose own session has ended gets none: it is a task
    or tool thread of a run that is over (an interrupted one left it behind), and what it does
    late belongs to no later run."""
    mine = _CONTEXT.get()
    active = _ACTIVE
    if mine is not None:
        return mine if mine in active else None
    return active[0] if len(active) == 1 else None


def is_active(session: ActiveSession) -> bool:
    """Whether ``session`` is still open (entered and not left)."""
    with _LOCK:
        return session in _ACTIVE


def active_mode() -> str | None:
    """The mode of the cassette active in this context (``"replay"``, ``"record"`` …), or None.

    For environment code that must know whether its HTTP calls are answered from a recording,
    e.g. a tool backend that needs an API key only when it really goes out."""
    session = current()
    return session.mode if session is not None else None


def sessions() -> tuple[ActiveSession, ...]:
    """All active sessions (diagnostics and tests)."""
    with _LOCK:
        return tuple(_ACTIVE)


def annotate(**fields: Any) -> None:
    """Tell the active cassette about the run: env name, tokenizer, model …

    A no-op when no cassette is active, so environments may call it unconditionally.
    """
    session = current()
    if session is not None:
        session.annotate(dict(fields))
