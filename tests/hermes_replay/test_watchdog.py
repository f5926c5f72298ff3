"""The interrupt machinery the stall guard and the dead-endpoint guard share
(``_runner.watchdog``): a trip becomes the guard's error, a user's own Ctrl-C stays a
KeyboardInterrupt, a loop that swallows one interrupt gets another, and nothing of the guard
outlives its block (handler restored, watchdog thread joined); a poke trips at once, where a
tick may come seconds late."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from hermes_replay._runner.watchdog import can_interrupt_main, watchdog


class Stuck(Exception):
    pass


@pytest.fixture(autouse=True)
def _python_handles_ctrl_c():
    """Each test starts under Python's own SIGINT handler, whatever the suite was started
    under (a background job ignores SIGINT), and leaves the disposition as it found it."""
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


def _require_default_handler() -> None:
    # the guard stands down under any other SIGINT owner (see the module docstring); an earlier
    # test that left its own handler installed would make every assertion below vacuous
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, \
        f"SIGINT handler is {signal.getsignal(signal.SIGINT)!r}: the watchdog is off"
    assert can_interrupt_main()


def _guard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "test-watchdog"]


def test_a_trip_interrupts_the_block_and_becomes_the_guards_error() -> None:
    _require_default_handler()
    calls = 0

    def check() -> str | None:
        nonlocal calls
        calls += 1
        return "stuck for good" if calls >= 3 else None

    ran_finally = False
    with pytest.raises(Stuck, match="stuck for good"):
        with watchdog(check, error=Stuck, name="test-watchdog", interval=0.01):
            try:
                time.sleep(30)
            finally:
                ran_finally = True  # cleanup in the block runs, as for a user's Ctrl-C
    assert ran_finally and calls >= 3
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _guard_threads() == []


def test_a_loop_that_swallows_the_interrupt_is_interrupted_again() -> None:
    _require_default_handler()
    swallowed = 0
    with pytest.raises(Stuck):
        with watchdog(lambda: "stuck", error=Stuck, name="test-watchdog", interval=0.01):
            while True:  # an env's retry loop that catches KeyboardInterrupt twice
                try:
                    time.sleep(30)
                except KeyboardInterrupt:
                    swallowed += 1
                    if swallowed >= 2:
                        raise
    assert swallowed == 2



def test_a_poke_trips_at_the_change_itself_not_at_a_tick() -> None:
    # The loop below keeps the GIL to itself except for os.urandom's instant without it, which
    # (CPython) starves a waiting thread for seconds: a guard that only ticks lets it run on.
    # The poke, called where the count changes, stops it at the change. No tick comes at all
    # here (an hour apart), so only the poke can stop the loop.
    _require_default_handler()
    count = 0
    with pytest.raises(Stuck, match="5 in a row"):
        with watchdog(lambda: "5 in a row" if count >= 5 else None, error=Stuck,
                      name="test-watchdog", interval=3600) as poke:
            while count < 100_000:
                count += 1
                os.urandom(16)
                sum(range(2000))
                poke()
    assert count == 5


def test_a_poke_from_another_thread_interrupts_the_main_thread() -> None:
    _require_default_handler()
    tripped = threading.Event()
    with pytest.raises(Stuck):
        with watchdog(lambda: "stuck" if tripped.is_set() else None, error=Stuck,
                      name="test-watchdog", interval=3600) as poke:
            def worker() -> None:
                poke()  # not tripped yet: nothing happens
                tripped.set()
                poke()
            threading.Thread(target=worker).start()
            time.sleep(30)
    assert _guard_threads() == []


class Outer(Exception):
    pass


def test_a_guard_inside_another_joins_its_watchdog_and_turns_only_its_own_trip() -> None:
    # one SIGINT owner: a nested guard used to find SIGINT taken and stay off without a word
    _require_default_handler()
    inner_count = outer_count = 0
    with pytest.raises(Stuck, match="inner"):  # the inner guard's trip is the inner's error
        with watchdog(lambda: "outer" if outer_count >= 5 else None, error=Outer,
                      name="test-watchdog", interval=3600) as outer_poke:
            with watchdog(lambda: "inner" if inner_count >= 3 else None, error=Stuck,
                          name="test-watchdog", interval=3600) as inner_poke:
                assert inner_poke == outer_poke and len(_guard_threads()) == 1
                while inner_count < 100:
                    inner_count += 1
                    inner_poke()
    assert inner_count == 3
    with pytest.raises(Outer, match="outer"):  # an outer trip passes through the inner block
        with watchdog(lambda: "outer" if outer_count >= 5 else None, error=Outer,
                      name="test-watchdog", interval=3600) as outer_poke:
            with watchdog(lambda: None, error=Stuck, name="test-watchdog", interval=3600):
                while outer_count < 100:
                    outer_count += 1
                    outer_poke()
    assert outer_count == 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _guard_threads() == []


def test_a_trip_found_as_the_block_ends_never_interrupts_the_caller() -> None:
    """A poke on another thread (an HTTP handler's) whose check finds the trip while the main
    thread is leaving the block: its SIGINT used to be sent after the block had put Python's
    handler back, and a KeyboardInterrupt hit whatever the caller ran next."""
    _require_default_handler()
    entered, release = threading.Event(), threading.Event()

    def check() -> str | None:
        if threading.current_thread() is threading.main_thread():
            return None
        entered.set()
        release.wait(10)  # the block's end is waiting for this check right now
        return "found late"

    try:
        with watchdog(check, error=Stuck, name="test-watchdog", interval=3600) as poke:
            side = threading.Thread(target=poke)
            side.start()
            assert entered.wait(10)
            threading.Timer(0.3, release.set).start()
        side.join(10)
        time.sleep(0.5)  # where a late SIGINT would land
    except KeyboardInterrupt:
        pytest.fail("a SIGINT of the guard reached the caller after its block had ended")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _guard_threads() == []


def test_a_users_own_ctrl_c_stays_a_keyboard_interrupt() -> None:
    _require_default_handler()
    with pytest.raises(KeyboardInterrupt):
        with watchdog(lambda: None, error=Stuck, name="test-watchdog", interval=0.01):
            signal.raise_signal(signal.SIGINT)
            time.sleep(30)


def test_nothing_of_the_guard_outlives_its_block() -> None:
    _require_default_handler()
    with watchdog(lambda: None, error=Stuck, name="test-watchdog", interval=0.01):
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert len(_guard_threads()) == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _guard_threads() == []


def test_off_where_it_cannot_own_sigint() -> None:
    seen: list[bool] = []

    def in_a_thread() -> None:
        seen.append(can_interrupt_main())
        with watchdog(lambda: "stuck", error=Stuck, name="test-watchdog", interval=0.01):
            time.sleep(0.1)  # never interrupted: not the main thread
        seen.append(True)

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert seen == [False, True]

    def other_owner(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, other_owner)
    try:
        assert not can_interrupt_main()
        with watchdog(lambda: "stuck", error=Stuck, name="test-watchdog", interval=0.01):
            time.sleep(0.1)
        assert signal.getsignal(signal.SIGINT) is other_owner  # left as it was
    finally:
        signal.signal(signal.SIGINT, previous)


def test_where_ctrl_c_is_ignored_a_trip_still_interrupts_and_an_outside_one_does_not() -> None:
    """A background job (``cmd &`` in a script, a CI runner, nohup) starts with SIGINT ignored.
    The guard takes SIGINT for its block there too — it used to stand down, and a recording
    against a dead endpoint retried 108 times — while a SIGINT from outside stays ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    assert can_interrupt_main()
    with watchdog(lambda: None, error=Stuck, name="test-watchdog", interval=0.01):
        signal.raise_signal(signal.SIGINT)  # someone else's Ctrl-C: still ignored
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # put back
    count = 0
    with pytest.raises(Stuck, match="stuck"):
        with watchdog(lambda: "stuck" if count >= 3 else None, error=Stuck,
                      name="test-watchdog", interval=3600) as poke:
            while count < 1000:
                count += 1
                poke()
    assert count == 3  # the trip interrupted at once, at the poke
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert _guard_threads() == []


def test_an_interrupt_that_lands_in_a_gc_callback_is_sent_again_not_reported() -> None:
    """A trip's SIGINT can arrive while the main thread runs a garbage-collector callback
    (hypothesis installs one; any library may): Python cannot raise it there and reports it as
    "Exception ignored in: <function …>" — noise for a user, a failure under pytest. The guard
    sends it again at the next tick, so that report is dropped; the block still ends with the
    guard's error."""
    import gc
    import sys

    _require_default_handler()
    reported: list[BaseException | None] = []
    landed = 0

    def slow_callback(phase: str, info: dict) -> None:
        nonlocal landed
        if phase == "start" and landed < 2:
            end = time.monotonic() + 0.2
            try:
                while time.monotonic() < end:  # long enough for a tick's SIGINT to land here
                    pass
            except KeyboardInterrupt:
                landed += 1
                raise

    def record(args: Any) -> None:
        reported.append(args.exc_value)

    previous = sys.unraisablehook
    sys.unraisablehook = record
    gc.callbacks.append(slow_callback)
    try:
        with pytest.raises(Stuck):
            with watchdog(lambda: "stuck", error=Stuck, name="test-watchdog", interval=0.05):
                while True:
                    if landed < 2:
                        gc.collect()  # its callback spins: a tick's interrupt lands there
                    else:
                        time.sleep(0.01)  # plain code: the next tick's interrupt ends it
        after = sys.unraisablehook
    finally:
        gc.callbacks.remove(slow_callback)
        sys.unraisablehook = previous
    assert landed >= 1  # the case itself happened: an interrupt raised inside the callback
    assert reported == [], reported
    assert after is record  # the block put the hook it found back
