"""`hermes-replay ls | head` must end quietly: a closed pipe is the reader's choice, not a crash."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_closed_stdout_pipe_is_not_a_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_replay.cli", "ls", "cassettes"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does after one line
    _, err = proc.communicate(timeout=120)
    assert first.strip(), "ls printed nothing"
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()[-2000:]
    assert proc.returncode == 0
