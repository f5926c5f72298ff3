"""Two processes recording different cassettes at the same time never interfere.

(Two processes recording into the *same* cassette: ``test_concurrent_same_cassette``.)
"""

from __future__ import annotations

from pathlib import Path

from _concurrency import run_recorders
from _reliability_helpers import EchoServer

from hermes_replay._cassette import load_cassette, partial_path

N = 10


def test_two_processes_two_cassettes_keep_their_own_traffic(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "c.jsonl", tmp_path / "b" / "c.jsonl"
    with EchoServer(latency=0.002) as server:
        results = run_recorders(tmp_path, f"http://127.0.0.1:{server.port}/v1",
                                [(a, "alpha"), (b, "beta")], N)
    assert [code for code, _ in results] == [0, 0], results
    assert all(progress.split() == ["open", "committed"] for _, progress in results)
    for path, prefix in ((a, "alpha"), (b, "beta")):
        cassette = load_cassette(path)
        assert cassette.complete and not partial_path(path).exists()
        assert cassette.header.env_name == prefix
        assert sorted(cassette.rollouts) == [f"{prefix}-0", f"{prefix}-1"]
        texts = sorted(i.request["body"]["messages"][0]["content"]
                       for i in cassette.interactions)
        assert texts == sorted(f"{prefix} turn {i}" for i in range(N))
        assert [i.seq for i in cassette.rollouts[f"{prefix}-0"].interactions] == \
            list(range(N // 2))
