"""``replay -j 2`` when a process dies (issue 36, findings 16 and 26).

- A worker that dies mid-cassette is one ERROR row for that cassette; the cassettes still to
  come run on a new worker. (A ``ProcessPoolExecutor`` failed every pending one as well:
  14 ERROR rows for one death.)
- A SIGKILLed ``replay -j 2`` takes its workers with it, and so the fork server and the
  resource tracker they kept alive (they ran on, ≈350 MB, 25 minutes later), and the process
  pools the envs made (a worker ending at once left them with no parent).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _calc_project import CASSETTE_REL
from _proc_table import command_line

import environments.hermes_base_env  # noqa: F401  (numpy once per process)
from hermes_replay.cli import main

NAMES = ("a", "b_dies", "c", "d")


def _corpus(project: Path) -> None:
    for name in NAMES:
        target = project / "cassettes" / name / "process.jsonl"
        target.parent.mkdir(parents=True)
        shutil.copy(project / CASSETTE_REL, target)
    (project / CASSETTE_REL).unlink()


def test_a_dead_worker_is_one_error_row(calc_project: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    _corpus(calc_project)
    monkeypatch.setenv("CALC_ENV_DIE", "b_dies")  # that cassette's worker exits at setup
    assert main(["replay", "cassettes", "-j", "2", "--out", "out", "--no-report"]) == 1
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()
            if line.startswith("cassettes/") and ".jsonl" in line.split()[0]}
    assert rows == {f"cassettes/{n}/process.jsonl": "ERROR" if n == "b_dies" else "ok"
                    for n in NAMES}, out
    assert "the replay worker process died while replaying" in out + err
    assert "exited with code 17" in out + err


def _session_processes(sid: int) -> list[int]:
    """Live processes of session ``sid`` (Linux /proc), zombies left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigkill_of_the_parent_leaves_no_process_behind(calc_project: Path) -> None:
    _corpus(calc_project)
    # each env also holds a process pool of its own, which a worker's os._exit would orphan
    env = {**os.environ, "CALC_ENV_JOURNAL": str(calc_project / "journal.txt"),
           "CALC_ENV_POOL": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_replay.cli", "replay", "cassettes",
                             "-j", "2", "--out", "out", "--no-report"],
                            cwd=calc_project, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        journal = calc_project / "journal.txt"
        while time.monotonic() < deadline:  # both workers are inside a replay
            if journal.is_file() and len(journal.read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the workers never started a replay")
        assert len(_session_processes(proc.pid)) >= 3  # parent, workers, their helpers
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while _session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _session_processes(proc.pid)
        assert left == [], [command_line(pid) for pid in left]
    finally:
        for pid in _session_processes(proc.pid):  # what this test started, by id
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_the_error_row_says_how_the_worker_died(tmp_path: Path) -> None:
    from hermes_replay._corpus.processes import Job, _died

    job = Job(0, tmp_path / "c.jsonl", tmp_path / "out", False, False, {}, str(tmp_path), {})
    error = _died(job, -signal.SIGKILL).summary.error or ""
    assert f"while replaying {tmp_path / 'c.jsonl'} (killed by SIGKILL" in error
    assert "Next step: replay it alone" in error
    assert "exited with code 17" in (_died(job, 17).summary.error or "")
