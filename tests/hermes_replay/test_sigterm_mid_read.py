"""SIGTERM while a ``replay`` or ``record --missing-only`` process is still reading its cassette
ends it cleanly: exit 143, one message, no traceback, the cassette byte for byte, nothing left
behind (issue 25, item 3's "SIGTERM does not end the process", for the cassette side).

The cassette is made big enough to take a while to read (the tiny env's recording padded with
copies of one interaction under other rollout ids), and the signal is sent once the process
holds the cassette open with its read position short of the end — really mid-read, seen in
``/proc/PID/fdinfo``, not guessed from a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_record_faults_end_cleanly import (
    _env,
    _good_cassettes,
    _one_clean_message,
    project,
    recorded,
)

__all__ = ["_good_cassettes", "project", "recorded"]  # fixtures, used by name below

PADDING = 20_000  # interactions: a second or more of reading, even on a quiet machine


def _pad(cassette: Path) -> bytes:
    lines = cassette.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    sample = next(r for r in records if r.get("type") == "interaction")
    with cassette.open("a", encoding="utf-8") as fh:
        for i in range(PADDING):
            fh.write(json.dumps({**sample, "rollout": f"pad-{i}"}) + "\n")
    return cassette.read_bytes()


def _reading_position(pid: int, path: Path) -> int | None:
    """The read offset of ``pid``'s open descriptor on ``path``, or None if it has none."""
    target = str(path.resolve())
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != target:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
                return int(info.readline().split()[1])  # "pos:\t<offset>"
        except (OSError, ValueError, IndexError):
            continue
    return None


@pytest.mark.parametrize("command", ["replay", "record --missing-only"])
def test_sigterm_mid_read_of_a_cassette_ends_cleanly(recorded, project: Path,
                                                      command: str) -> None:
    cassette, _, ep = recorded
    before = _pad(cassette)
    cli = (["replay", "cassettes/tiny_env/process.jsonl"] if command == "replay" else
           ["record", "envs/tiny_env.py", "--missing-only", "--endpoint", ep.base_url,
            "--model", "scripted", "--", "process", "--env.total_steps", "2"])
    proc = subprocess.Popen([sys.executable, "-m", "hermes_replay.cli", *cli], cwd=project,
                            env=_env(project), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        position = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            position = _reading_position(proc.pid, cassette)
            if position is not None and 0 < position < len(before):
                break
            time.sleep(0.005)
        assert position is not None and 0 < position < len(before), (
            "the process never held the cassette open mid-read", proc.poll())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, out + err
    _one_clean_message(err)
    assert "terminated (SIGTERM)" in err, err
    assert cassette.read_bytes() == before
    assert not list(cassette.parent.glob(".*.tmp"))  # no temp file of a rewrite left
    assert not list((project / "tmp").glob(f"hermes-sandboxes-{proc.pid}-*"))
