"""Two processes recording into the same cassette: they coordinate, or one fails with a
clear error naming the cassette — never does one recording silently replace the other."""

from __future__ import annotations

from pathlib import Path

from _concurrency import run_recorders
from _reliability_helpers import EchoServer

from hermes_replay._cassette import load_cassette

N = 10


def test_same_cassette_from_two_processes_loses_nothing_silently(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "c.jsonl"
    with EchoServer(latency=0.002) as server:
        results = run_recorders(tmp_path, f"http://127.0.0.1:{server.port}/v1",
                                [(path, "alpha"), (path, "beta")], N)
    failed = [progress for code, progress in results if code != 0]
    cassette = load_cassette(path)
    prefixes = {rid.split("-")[0] for rid in cassette.rollouts}
    if failed:  # one was refused: it must say so, and the other one's work is all there
        assert len(failed) == 1, results
        assert str(path) in failed[0] and "next step" in failed[0], failed[0]
        assert len(prefixes) == 1 and len(cassette.interactions) == N
    else:  # both finished: the cassette must hold both recordings
        assert prefixes == {"alpha", "beta"}, (
            f"both recorders reported success but {path} holds only {prefixes}: "
            f"the other recording was silently lost ({results})")
        assert len(cassette.interactions) == 2 * N
