"""The quota warden: an isolated command's workspace is counted by a process of its own, so a
busy harness (the GIL held by other rollouts' work) cannot let a write loop fill the disk.

Each test runs real commands under real bwrap and measures the workspace from the host.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from _bwrap_required import bwrap_required_fixture

from environments.tools.sandbox import (
    SandboxLimits,
    _bwrap,
    _warden,
    cleanup_sandbox,
    get_sandbox,
)
from environments.tools.sandbox._warden import Warden, start_time, warden

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux-only")

MiB = 1024**2
QUOTA = 24 * MiB
# A loop that writes 160 MiB in 4 MiB files, then waits: far past the quota, and bounded, so a
# quota that is not enforced shows as 160 MiB on disk rather than a full disk.
WRITE_160 = "for i in $(seq 40); do head -c 4M /dev/zero > f$i.bin; done; sleep 30"


_isolation_required = bwrap_required_fixture()


@pytest.fixture
def box():
    tid = f"test-warden-{uuid.uuid4().hex[:8]}"
    sandbox = get_sandbox(tid)
    sandbox.limits = SandboxLimits(workspace_bytes=QUOTA, file_bytes=8 * MiB)
    yield sandbox
    cleanup_sandbox(tid)


def _used(box) -> int:
    return _bwrap.tree_bytes(box.work_dir, 10**12)


def _hold_the_gil_once_writing_starts(work_dir: str, seconds_of_work: int) -> threading.Thread:
    """A thread that, as soon as the command has written its first file, holds the GIL without
    a break (``sum`` over a range is one C call: the interpreter never offers the GIL in it) —
    what a harness thread counting the workspace would have to wait out."""

    def hog() -> None:
        deadline = time.monotonic() + 10
        while (not any(name.endswith(".bin") for name in os.listdir(work_dir))
               and time.monotonic() < deadline):
            time.sleep(0.001)
        sum(range(seconds_of_work * 30_000_000))

    thread = threading.Thread(target=hog, daemon=True)
    thread.start()
    return thread


def test_a_harness_holding_the_gil_cannot_let_a_write_loop_past_the_quota(box):
    hog = _hold_the_gil_once_writing_starts(box.work_dir, 2)
    result = box.run(WRITE_160, timeout=30)
    hog.join()
    used = _used(box)
    # Counted in a harness thread, nothing was counted while the GIL was held: all 160 MiB
    # were written. The warden counts on its own and stops the loop a few files past 24 MiB.
    assert result.exit_code == 137, result
    assert "quota of 24 MiB" in result.output
    assert used < QUOTA + 64 * MiB, f"{used / MiB:.1f} MiB on disk against a 24 MiB quota"


def test_without_a_warden_the_harness_thread_still_stops_the_command(box, monkeypatch):
    started: list[bool] = []

    def cannot_start(self) -> None:
        started.append(True)
        self._proc = None

    monkeypatch.setattr(Warden, "_start", cannot_start)
    monkeypatch.setattr(_warden, "_warden", Warden())
    result = box.run("i=0; while :; do head -c 4M /dev/zero > f$i.bin; i=$((i+1)); done", 30)
    assert started, "the warden was never asked for"
    assert result.exit_code == 137 and "quota of 24 MiB" in result.output, result
    assert _used(box) > QUOTA


def test_a_warden_killed_while_a_command_runs_is_started_again(box):
    box.run("true")  # the process's warden is up
    first = warden().pid
    assert first is not None
    # the loop starts writing after the kill below
    command = "sleep 1.5; i=0; while :; do head -c 4M /dev/zero > f$i.bin; i=$((i+1)); done"
    killer = threading.Timer(0.3, os.kill, (first, signal.SIGKILL))
    killer.start()
    result = box.run(command, timeout=20)
    killer.join()
    # Without a new warden the loop would run to the 20 s timeout (exit 124).
    assert result.exit_code == 137 and "quota of 24 MiB" in result.output, result
    assert warden().pid not in (None, first)


def test_the_warden_ends_with_the_process_it_guards(tmp_path):
    script = textwrap.dedent(
        """
        import os, sys
        from environments.tools.sandbox import get_sandbox
        from environments.tools.sandbox._warden import warden
        get_sandbox("warden-ends").run("true")
        print(warden().pid, flush=True)
        os._exit(0)  # no cleanup: the way a killed harness ends
        """
    )
    env = {**os.environ, "HERMES_SANDBOX": "bwrap", "TMPDIR": str(tmp_path)}  # what it leaves
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while start_time(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(pid) is None, f"warden {pid} outlived its harness"


def test_the_warden_never_kills_a_process_that_only_has_the_same_number():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        born = start_time(sleeper.pid)
        assert born is not None
        _warden._kill(sleeper.pid, str(int(born) + 1))  # the number reused by a later process
        time.sleep(0.1)
        assert sleeper.poll() is None, "a process was killed by number alone"
        _warden._kill(sleeper.pid, born)
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_warden_imports_nothing_from_the_working_folder_or_pythonpath(tmp_path, monkeypatch):
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "ran"
    for name in ("_tree.py", "_warden.py", "select.py", "sitecustomize.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'w').write({name!r})\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    guard = Warden()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        key = guard.watch(sleeper.pid, str(planted), 10**9)
        assert key is not None and guard.alive()
        time.sleep(0.3)  # counted a few times
        assert guard.alive()
        assert not marker.exists(), f"the warden imported planted {marker.read_text()}"
    finally:
        sleeper.kill()
        sleeper.wait()
        assert guard._proc is not None and guard._proc.stdin is not None
        guard._proc.stdin.close()
        assert guard._proc.wait(timeout=5) == 0


def test_the_warden_counts_ahead_of_the_commands_where_it_may(box):
    box.run("true")
    pid = warden().pid
    assert pid is not None
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    # root may raise a priority (CAP_SYS_NICE); anyone else keeps the one it started with
    expected = max(-20, ours - 10) if os.geteuid() == 0 else ours
    assert int(fields[16]) == expected  # field 19 of stat: nice


def test_a_forked_child_starts_its_own_warden_and_leaves_the_parents_alone(box):
    box.run("true")
    parent_warden = warden().pid
    read, write = os.pipe()
    guard = warden()
    with guard._lock:  # as another thread may hold it at the moment of a fork
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            try:
                box.run("true")  # a copied held lock would hang here for good
                os.write(write, str(warden().pid).encode())
            finally:
                os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 30)
        assert ready, "the forked child hung on the warden's lock"
        child_warden = int(os.read(read, 64) or 0)
    finally:
        os.close(read)
        if not ready:
            os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert child_warden not in (0, parent_warden)
    assert warden().pid == parent_warden  # the parent's is untouched
    deadline = time.monotonic() + 10  # and the child's ended with the child
    while start_time(child_warden) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_time(child_warden) is None


def test_the_warden_holds_none_of_the_harnesss_output(box):
    # Started during a run whose fds 1 and 2 are a capture pipe (the env log), a warden that
    # inherited them would hold that pipe open for as long as it lives.
    box.run("true")
    pid = warden().pid
    assert pid is not None
    assert [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (1, 2)] == ["/dev/null"] * 2
