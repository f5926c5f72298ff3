"""Listeners for events that environments report, so ``_scope`` never imports cassette code.

The active cassette session registers a listener here; environments only call
``hermes_replay.rollout(...)`` / ``RolloutScope.report(...)`` / ``annotate(...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hermes_replay._scope import RolloutScope


class Listener(Protocol):
    def rollout_finished(self, scope: RolloutScope) -> None: ...

    def annotate(self, fields: dict[str, Any]) -> None: ...


_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def rollout_finished(scope: RolloutScope) -> None:
    for listener in list(_listeners):
        listener.rollout_finished(scope)


def annotate(**fields: Any) -> None:
    """Tell the active cassette (if any) about the run: env name, tokenizer, model …

    A no-op when no cassette is active, so environments may call it unconditionally.
    """
    for listener in list(_listeners):
        listener.annotate(dict(fields))
