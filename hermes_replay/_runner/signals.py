"""SIGTERM ends a CLI run the way Ctrl-C does: with a message, cleanup and the old cassette.

By default SIGTERM (``timeout``, a CI cancel, ``kill``) ends Python at once: no ``finally``,
no ``atexit`` — so no message, sandbox folders left in the temp directory, and a recording
cut wherever it was. Here it raises ``Terminated`` (a ``KeyboardInterrupt``) in the main
thread instead: the cassette block closes its journal and keeps the previous cassette, every
rollout's ``finally`` cleans its sandbox, ``atexit`` removes the sandbox root, and the
runner prints what happened. The exit code stays the conventional 128 + signal number.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "exit_code", "terminate_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM/SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: BaseException) -> int:
    """128 + the signal number: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)


def describe(exc: BaseException) -> str:
    return (f"terminated ({signal.Signals(exc.signum).name})" if isinstance(exc, Terminated)
            else "interrupted")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise ``Terminated`` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    saved = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            saved[sig] = signal.signal(sig, raise_terminated)
        except (ValueError, OSError):  # not settable here
            pass
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)
