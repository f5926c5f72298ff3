"""Two cassettes recording at the same time in one process (two threads, e.g. two
environments driven side by side): each cassette gets its own traffic, or the second
``cassette()`` refuses with a clear error — traffic is never silently sent to the other."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from _reliability_helpers import EchoServer

import hermes_replay
from hermes_replay._cassette import load_cassette


def test_two_threads_two_cassettes_do_not_swap_traffic(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=20)
    errors: dict[str, BaseException] = {}

    def worker(name: str, base: str) -> None:
        try:
            with hermes_replay.cassette(tmp_path / f"{name}.jsonl", "record"):
                barrier.wait()  # both cassettes are active from here on
                with httpx.Client() as client:
                    for i in range(4):
                        with hermes_replay.rollout(f"{name}-{i}"):
                            client.post(base + "/chat/completions",
                                        json={"messages": [{"role": "user", "content": name}]})
                        time.sleep(0.005)
                barrier.wait()
        except threading.BrokenBarrierError:
            pass
        except Exception as exc:
            errors[name] = exc
            barrier.abort()

    with EchoServer() as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        threads = [threading.Thread(target=worker, args=(n, base)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    if errors:  # refusing the second cassette is fine if it says why
        assert len(errors) == 1 and isinstance(next(iter(errors.values())),
                                               hermes_replay.HermesReplayError), errors
        return
    for name in ("a", "b"):
        rollouts = sorted(load_cassette(tmp_path / f"{name}.jsonl").rollouts)
        assert rollouts == [f"{name}-{i}" for i in range(4)], (
            f"{name}.jsonl holds {rollouts}: traffic went to the other cassette")
