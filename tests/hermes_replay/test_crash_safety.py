"""A recording killed with SIGKILL at random points never leaves an unreadable cassette.

A "zygote" subprocess imports everything once and forks one recorder per run (so 40 runs
cost well under a second of start-up instead of 40 interpreter starts). Each recorder
re-records an *existing* cassette through the real ``cassette(mode="record")`` over httpx
against a loopback server, printing ``done i`` to a progress file after each completed
interaction; the test SIGKILLs it after a random delay. Then, per run:

- the existing cassette is byte-for-byte intact, or (killed after the atomic rename) a new
  complete cassette that loads with every interaction;
- a ``.partial`` left behind loads (flagged incomplete) and holds at least every
  interaction the recorder had completed, and ``verify`` flags it as interrupted;
- no completed interaction is lost without a trace.

The run counts per outcome are printed (``-s``) for docs/reliability.md.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _reliability_helpers import EchoServer

from hermes_replay._cassette import load_cassette, partial_path
from hermes_replay._cassette.verify import verify_file

RUNS = 40
INTERACTIONS = 12
SEED = 8  # fixed so a failure can be replayed

ZYGOTE = r'''
import json, os, sys
import httpx
import hermes_replay
from hermes_replay._session import intercept as _intercept

# warm every lazily imported adapter once, so forked recorders start instantly
with hermes_replay.cassette(os.devnull + ".never", "passthrough"):
    pass
CLIENT = httpx.Client()  # no connection yet; building its SSL context is the slow part


def record(path, base, n, progress):
    out = open(progress, "w", buffering=1)
    with hermes_replay.cassette(path, "record", header={"env_name": "crash"}):
        out.write("open\n")
        if True:
            client, histories = CLIENT, {}
            for i in range(n):
                rid = f"r{i % 3}"
                msgs = histories.setdefault(rid, [{"role": "system", "content": "S" * 500}])
                msgs.append({"role": "user", "content": f"turn {i}"})
                with hermes_replay.rollout(rid):
                    resp = client.post(base + "/chat/completions",
                                       json={"model": "m", "messages": msgs})
                msgs.append(resp.json()["choices"][0]["message"])
                out.write(f"done {i}\n")
        out.write("closing\n")
    out.write("committed\n")


print("ready", flush=True)
for line in sys.stdin:
    path, base, n, progress = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            record(path, base, int(n), progress)
        finally:
            os._exit(0)
    print(f"pid {pid}", flush=True)
    _, status = os.waitpid(pid, 0)
    print(f"exit {status}", flush=True)
'''


class Zygote:
    def __init__(self, tmp: Path) -> None:
        script = tmp / "zygote.py"
        script.write_text(ZYGOTE)
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self._read() == "ready"

    def _read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def run(self, path: Path, base: str, progress: Path, kill_after: float | None) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{path} {base} {INTERACTIONS} {progress}\n")
        self.proc.stdin.flush()
        pid = int(self._read().split()[1])
        if kill_after is not None:
            time.sleep(kill_after)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # already finished: a kill "after the end" is a valid point too
        return int(self._read().split()[1])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture
def zygote(tmp_path: Path):
    z = Zygote(tmp_path)
    yield z
    z.close()


def _progress(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_sigkill_at_random_points_never_corrupts(tmp_path: Path, zygote: Zygote) -> None:
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    recovered = 0
    with EchoServer(latency=0.004) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        # the cassette that every run re-records; a second clean run times the window
        original = tmp_path / "original.jsonl"
        assert zygote.run(original, base, tmp_path / "p0", kill_after=None) == 0
        started = time.perf_counter()
        assert zygote.run(tmp_path / "timing.jsonl", base, tmp_path / "p1", None) == 0
        window = (time.perf_counter() - started) * 1.2
        print(f"\nclean recording of {INTERACTIONS} interactions: {window / 1.2:.3f} s")
        assert len(load_cassette(original).interactions) == INTERACTIONS
        old = original.read_bytes()

        for run in range(RUNS):
            folder = tmp_path / f"run{run}"
            folder.mkdir()
            path = folder / "c.jsonl"
            shutil.copyfile(original, path)
            progress = folder / "progress"
            status = zygote.run(path, base, progress, kill_after=rng.uniform(0, window))
            done = sum(1 for word in _progress(progress) if word == "done")
            events = _progress(progress)
            partial = partial_path(path)
            where = f"run {run} (exit status {status}, progress {events})"

            if path.read_bytes() != old:  # killed after the atomic rename: all or nothing
                new = load_cassette(path)
                assert new.complete and len(new.interactions) == INTERACTIONS, where
                outcomes["after commit: new cassette complete"] += 1
            elif partial.exists():
                journal = load_cassette(partial)  # must not raise
                assert not journal.complete, where
                assert len(journal.interactions) >= done, where  # nothing completed is lost
                assert any("interrupted recording" in f.message for f in verify_file(partial))
                recovered += len(journal.interactions)
                outcomes["mid-recording, .partial with 0 interactions"] += not journal.interactions
                outcomes["mid-recording: old intact, .partial readable"] += 1
            else:
                assert done == 0, f"{where}: completed interactions vanished"
                outcomes["before the journal opened: old intact"] += 1
            assert load_cassette(path).complete, where  # always a readable cassette
            strays = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
            outcomes["stray temp files left"] += len(strays)
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
    print(f"\nSIGKILL runs: {RUNS}; {summary}; interactions recovered from .partial: "
          f"{recovered}")
    killed_mid = outcomes["mid-recording: old intact, .partial readable"]
    assert killed_mid >= RUNS // 4  # the random points really fell inside the recording
