"""Interrupt the main thread, as Ctrl-C would, when a watched condition says the run is stuck.

Two guards stop a run that can never finish: a replay that keeps missing (``_runner.stall``)
and a recording whose endpoint does not answer (``_runner.dead_endpoint``). Both need the same
delicate machinery, kept here once: a daemon thread polls a check; when it reports a trip, the
main thread gets SIGINT (so ``finally`` blocks and sandbox cleanup run, exactly as for a user's
Ctrl-C), again at every tick until the block ends, because an env or library loop may swallow
one ``KeyboardInterrupt``; the resulting interrupt becomes the guard's own error. A handler of
ours ignores a SIGINT that arrives after the block ended, so a late one never interrupts the
caller, and the previous handler is always restored.

The thread alone is not enough: CPython can starve it of the GIL for seconds while the main
thread loops on work that releases the GIL for an instant (``os.urandom`` does, and the openai
SDK calls it for every request) — in CI an env's retry loop ran 10,000 misses before the stall
guard's first tick. So where the watched condition is a count, the code that changes it calls
``poke()``: the check runs at once on that thread, and a trip interrupts without waiting for a
tick. The thread stays for what only time can tell (a deadline) and to repeat the interrupt.

Only where Ctrl-C works as usual (the main thread, Python's default SIGINT handler, POSIX):
elsewhere — a worker thread, pytest-timeout's or a debugger's handler — the guard is off
rather than fighting another owner of SIGINT.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

__all__ = ["Poke", "can_interrupt_main", "watchdog"]

Poke = Callable[[], None]

TripT = TypeVar("TripT")


def can_interrupt_main() -> bool:
    """Whether a watchdog may own SIGINT here (see the module docstring)."""
    return (os.name == "posix"
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


class _Dog(Generic[TripT]):
    def __init__(self, check: Callable[[], TripT | None], interval: float) -> None:
        self.check = check
        self.interval = interval
        self.trip: TripT | None = None
        self.stop = threading.Event()
        self.main = threading.main_thread().ident
        self._checking = threading.Lock()  # one check at a time: checks keep state

    def poke(self) -> None:
        """Check now, on the calling thread; interrupt the main thread if tripped (again)."""
        if self.stop.is_set():
            return
        with self._checking:
            if self.trip is None:
                self.trip = self.check()
            tripped = self.trip is not None
        if tripped and self.main is not None:
            signal.pthread_kill(self.main, signal.SIGINT)

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.poke()


@contextmanager
def watchdog(check: Callable[[], TripT | None], *, error: Callable[[TripT], BaseException],
             name: str, interval: float) -> Iterator[Poke]:
    """Run the block; every ``interval`` seconds call ``check()`` on a watchdog thread, and once
    it returns a trip (anything but None) interrupt the main thread until the block ends; the
    interrupt is raised as ``error(trip)`` (built on the main thread). ``check`` must never wait
    on a lock the main thread holds: a busy main thread retakes it at once and the watchdog
    starves, which is exactly when it is needed. A KeyboardInterrupt with no trip (the user's own
    Ctrl-C) propagates unchanged. Where the guard cannot own SIGINT, the block just runs.

    Yields ``poke``: call it, from any thread, right after the watched condition changes."""
    if not can_interrupt_main():
        yield _nothing
        return
    dog: _Dog[TripT] = _Dog(check, interval)

    def on_sigint(signum: int, frame: Any) -> None:
        if not dog.stop.is_set():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    thread = threading.Thread(target=dog.run, name=name, daemon=True)
    thread.start()
    try:
        yield dog.poke
    except KeyboardInterrupt:
        if dog.trip is None:
            raise
        raise error(dog.trip) from None
    finally:
        dog.stop.set()
        thread.join()
        signal.signal(signal.SIGINT, previous)


def _nothing() -> None:
    """The poke of a guard that is off."""
