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

Only where no one else owns SIGINT (the main thread, POSIX, and Python's default handler or
SIGINT ignored): elsewhere — a worker thread, pytest-timeout's or a debugger's handler — the
guard is off rather than fighting another owner of SIGINT. Ignored is how a shell starts a
background job (``cmd &`` in a script, CI runners, ``nohup``): the guard takes SIGINT for its
block all the same — it used to stand down there, and a recording against a dead endpoint
retried 108 times — but a SIGINT from outside stays ignored, and SIG_IGN is put back after.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
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
            and signal.getsignal(signal.SIGINT) in (signal.default_int_handler, signal.SIG_IGN))


class _Watch(Generic[TripT]):
    """One guard's condition on a watchdog: its check and, once it tripped, why."""

    def __init__(self, check: Callable[[], TripT | None]) -> None:
        self.check = check
        self.trip: TripT | None = None
        self.closing = False  # its block is ending: its trip interrupts nothing any more

    def live_trip(self) -> bool:
        return self.trip is not None and not self.closing


class _Dog:
    """The one watchdog of the main thread: a thread, the SIGINT handler, every guard's watch."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.watches: list[_Watch[Any]] = []
        self.stop = threading.Event()
        self.main = threading.main_thread().ident
        self._checking = threading.Lock()  # one check at a time: checks keep state

    def poke(self) -> None:
        """Check now, on the calling thread; interrupt the main thread if tripped (again).

        The SIGINT is sent under the lock a block's end takes too: a poke on another thread
        that found a trip just as the block ended can no longer send it after the block has
        restored the previous handler, where it would interrupt the caller's own code."""
        if self.stop.is_set():
            return
        with self._checking:
            if self.stop.is_set():
                return
            for watch in self.watches:
                if watch.trip is None and not watch.closing:
                    watch.trip = watch.check()
            if self.main is not None and any(watch.live_trip() for watch in self.watches):
                signal.pthread_kill(self.main, signal.SIGINT)

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.poke()


_ACTIVE: _Dog | None = None  # the main thread's watchdog while a guard's block runs


class _InterruptedTasks(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for a task that ended with the
    interrupt a guard (or the user's Ctrl-C) raised: ``asyncio.run`` cancels the env's tasks
    while the interrupt unwinds, the one it lands in keeps it as its exception, and when that
    task is collected — often at interpreter exit, after the run's own report — asyncio logs an
    80-line traceback of our interrupt under it. The run's error already says why it stopped."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, KeyboardInterrupt)
                    and str(record.msg).startswith("Task exception was never retrieved"))


def _quiet_interrupted_tasks() -> None:
    logger = logging.getLogger("asyncio")
    if not any(isinstance(f, _InterruptedTasks) for f in logger.filters):
        logger.addFilter(_InterruptedTasks())


@contextmanager
def watchdog(check: Callable[[], TripT | None], *, error: Callable[[TripT], BaseException],
             name: str, interval: float) -> Iterator[Poke]:
    """Run the block; every ``interval`` seconds call ``check()`` on a watchdog thread, and once
    it returns a trip (anything but None) interrupt the main thread until the block ends; the
    interrupt is raised as ``error(trip)`` (built on the main thread). ``check`` must never wait
    on a lock the main thread holds: a busy main thread retakes it at once and the watchdog
    starves, which is exactly when it is needed. A KeyboardInterrupt with no trip (the user's own
    Ctrl-C) propagates unchanged. Where the guard cannot own SIGINT, the block just runs.

    Guards nest: inside another guard's block, this one's check joins the watchdog already
    running (one thread, one SIGINT handler) instead of finding SIGINT owned and staying off;
    each guard turns only its own trip into its error.

    Yields ``poke``: call it, from any thread, right after the watched condition changes."""
    global _ACTIVE
    nested = _ACTIVE is not None and threading.current_thread() is threading.main_thread()
    if not nested and not can_interrupt_main():
        yield _nothing
        return
    _quiet_interrupted_tasks()
    watch: _Watch[TripT] = _Watch(check)
    if nested:
        assert _ACTIVE is not None
        dog = _ACTIVE
    else:
        dog = _ACTIVE = _Dog(interval)

        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN

        def on_sigint(signum: int, frame: Any) -> None:
            if dog.stop.is_set():
                return
            watches = list(dog.watches)
            if any(w.live_trip() for w in watches):
                raise KeyboardInterrupt
            if any(w.closing and w.trip is not None for w in watches):
                return  # a repeat sent for a block that is ending: not the caller's
            if ignored:
                return  # not a trip: a Ctrl-C this process ignored before the guard still is
            raise KeyboardInterrupt  # the user's own Ctrl-C

        previous = signal.signal(signal.SIGINT, on_sigint)
        previous_hook = sys.unraisablehook
        sys.unraisablehook = _ours_dropped(dog, previous_hook)
        thread = threading.Thread(target=dog.run, name=name, daemon=True)
        thread.start()
    outer_interval = dog.interval
    dog.interval = min(outer_interval, interval)
    with dog._checking:
        dog.watches.append(watch)
    try:
        yield dog.poke
    except KeyboardInterrupt:
        if watch.trip is None:
            raise  # the user's Ctrl-C, or an outer guard's trip: that guard's to turn
        raise error(watch.trip) from None
    finally:
        watch.closing = True  # first: a SIGINT that comes while we wait for the lock is a repeat
        with dog._checking:
            dog.watches.remove(watch)
            if not nested:
                dog.stop.set()  # under the lock: no poke sends a SIGINT after this
        dog.interval = outer_interval
        if not nested:
            thread.join()
            signal.signal(signal.SIGINT, previous)
            if getattr(sys.unraisablehook, "_hermes_dog", None) is dog:
                sys.unraisablehook = previous_hook
            _ACTIVE = None


def _ours_dropped(dog: _Dog, previous: Callable[[Any], Any]) -> Callable[[Any], None]:
    """An unraisable-exception hook for the block: drops the interrupt a trip sent when it
    landed where Python cannot raise it — a garbage-collector callback or a ``__del__`` running
    at that instant ("Exception ignored in: <function gc_callback …>", which pytest also turns
    into a failure). Nothing is lost: the interrupt is sent again at the next tick, until the
    block ends. Everything else, the user's own Ctrl-C included, goes to ``previous``."""
    def hook(args: Any) -> None:
        if isinstance(args.exc_value, KeyboardInterrupt) \
                and any(w.trip is not None for w in list(dog.watches)):
            return
        previous(args)

    hook._hermes_dog = dog  # type: ignore[attr-defined]
    return hook


def _nothing() -> None:
    """The poke of a guard that is off."""
