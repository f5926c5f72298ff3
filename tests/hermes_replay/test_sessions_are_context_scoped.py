"""Two cassettes open at once in one process — two threads, or two asyncio tasks — each hold
exactly their own traffic, rollout outcomes and annotations: a session is bound to the context
that opened it (``hermes_replay._active``), and nothing reported in one reaches the other."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
from _reliability_helpers import EchoServer

import hermes_replay
from hermes_replay import _active
from hermes_replay._cassette import load_cassette


def _assert_only_its_own(path: Path, name: str, n: int) -> None:
    cassette = load_cassette(path)
    want = [f"{name}-{i}" for i in range(n)]
    assert sorted(cassette.rollouts) == want, f"{path.name} holds {sorted(cassette.rollouts)}"
    assert sorted(cassette.outcomes) == want, f"{path.name} outcomes {sorted(cassette.outcomes)}"
    assert all(o["reward"] == float(ord(name)) for o in cassette.outcomes.values())
    assert cassette.header.env_name == f"env-{name}"


def test_two_threads_each_record_only_their_own(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=20)
    errors: list[BaseException] = []

    def worker(name: str, base: str) -> None:
        try:
            with hermes_replay.cassette(tmp_path / f"{name}.jsonl", "record"):
                barrier.wait()  # both cassettes are active from here on
                hermes_replay.annotate(env_name=f"env-{name}")
                with httpx.Client() as client:
                    for i in range(4):
                        with hermes_replay.rollout(f"{name}-{i}") as scope:
                            client.post(base + "/chat/completions",
                                        json={"messages": [{"role": "user", "content": name}]})
                            scope.report(reward=float(ord(name)))
                barrier.wait()  # neither closes before the other is done
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    with EchoServer() as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        threads = [threading.Thread(target=worker, args=(n, base)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert not errors, errors
    for name in ("a", "b"):
        _assert_only_its_own(tmp_path / f"{name}.jsonl", name, 4)


def test_two_asyncio_tasks_each_record_only_their_own(tmp_path: Path) -> None:
    async def task(name: str, base: str, both_open: asyncio.Barrier) -> None:
        async with hermes_replay.cassette(tmp_path / f"{name}.jsonl", "record"):
            await both_open.wait()
            hermes_replay.annotate(env_name=f"env-{name}")
            async with httpx.AsyncClient() as client:
                for i in range(3):
                    with hermes_replay.rollout(f"{name}-{i}") as scope:
                        await client.post(base + "/chat/completions", json={"messages": [
                            {"role": "user", "content": name}]})
                        scope.report(reward=float(ord(name)))
                    await asyncio.sleep(0)  # interleave with the other task
            await both_open.wait()

    async def main(base: str) -> None:
        both_open = asyncio.Barrier(2)
        await asyncio.gather(task("a", base, both_open), task("b", base, both_open))

    with EchoServer() as server:
        asyncio.run(main(f"http://127.0.0.1:{server.port}/v1"))
    for name in ("a", "b"):
        _assert_only_its_own(tmp_path / f"{name}.jsonl", name, 3)


def test_a_context_without_its_own_session_gets_the_only_one_else_none(tmp_path: Path) -> None:
    """A thread the env starts without copying its context still reaches the one open cassette;
    with two open and none of its own, it reaches neither (no guessing)."""
    seen: list[object] = []

    def look() -> None:
        seen.append(_active.current())

    with hermes_replay.cassette(tmp_path / "one.jsonl", "passthrough") as one:
        t = threading.Thread(target=look)
        t.start()
        t.join()
        opened = threading.Event()
        release = threading.Event()

        def other() -> None:
            with hermes_replay.cassette(tmp_path / "two.jsonl", "passthrough"):
                opened.set()
                release.wait(10)

        t2 = threading.Thread(target=other)
        t2.start()
        assert opened.wait(10)
        t3 = threading.Thread(target=look)
        t3.start()
        t3.join()
        assert _active.current() is one  # this context's own still wins
        release.set()
        t2.join()
    assert seen == [one, None]
    assert _active.current() is None


class _Suspend:
    """An await that never resumes by itself: a rollout left mid-turn by an interrupted run."""

    def __await__(self):  # type: ignore[no-untyped-def]
        yield


class _Heard:
    def __init__(self) -> None:
        self.finished: list[str] = []

    def rollout_finished(self, scope: object) -> None:
        self.finished.append(scope.id)  # type: ignore[attr-defined]

    def annotate(self, fields: dict[str, object]) -> None:
        pass


def test_a_rollout_abandoned_by_an_earlier_run_reports_to_no_later_one(tmp_path: Path) -> None:
    """An interrupted run leaves its rollout's coroutine suspended; the garbage collector
    closes it later, in whatever context runs then: its ``finally`` must not put that rollout
    into the run that is active by then (it showed as a third rollout in a two-rollout replay)."""

    async def rollout_left_mid_turn() -> None:
        with hermes_replay.rollout("old-0") as scope:
            scope.report(reward=None, turns_used=1)
            await _Suspend()

    heard_old, heard_new = _Heard(), _Heard()
    with hermes_replay.cassette(tmp_path / "old.jsonl", "passthrough") as old:
        old.observe(heard_old)
        left = rollout_left_mid_turn()
        left.send(None)  # now inside the rollout, suspended
    unrecorded = rollout_left_mid_turn()  # a rollout of a run with no cassette at all
    unrecorded.send(None)
    with hermes_replay.cassette(tmp_path / "new.jsonl", "passthrough") as new:
        new.observe(heard_new)
        with hermes_replay.rollout("new-0"):
            pass
        left.close()  # what the garbage collector does to them, here and now
        unrecorded.close()
    assert heard_new.finished == ["new-0"]
    assert heard_old.finished == []  # closed after its run ended: reported to no one


def test_a_context_whose_own_run_ended_reaches_no_later_run(tmp_path: Path) -> None:
    """A tool thread or task carries a copy of its run's context; when that run is over (an
    interrupted one leaves such threads behind), what it does late must not reach the run that
    is active by then — unlike a context that never had a run of its own."""
    import contextvars

    with hermes_replay.cassette(tmp_path / "old.jsonl", "passthrough"):
        left_behind = contextvars.copy_context()  # what a tool thread of this run runs in
    with hermes_replay.cassette(tmp_path / "new.jsonl", "passthrough") as new:
        assert left_behind.run(_active.current) is None
        assert contextvars.Context().run(_active.current) is new  # never had one: the only one
