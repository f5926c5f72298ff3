"""The local sandbox inside bubblewrap: hostile commands are contained and reported as tool errors.

Each test runs a real command through the real ``terminal`` tool (or the sandbox itself) under
real bwrap, then checks the host: no file written outside the workspace, no secret read, no
connection made, no process left, no disk filled. On Linux bwrap must work here (``.ci/run``
installs bubblewrap); a missing bwrap is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid

import pytest
from _bwrap_required import bwrap_required_fixture

from environments.tools import dispatch_tool, tool_result_error
from environments.tools.sandbox import (
    IsolationUnavailableError,
    SandboxLimits,
    _bwrap,
    cleanup_sandbox,
    get_sandbox,
    isolation,
)
from environments.tools.sandbox._procs import scan

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux-only")


_isolation_required = bwrap_required_fixture()


@pytest.fixture
def task_id():
    tid = f"test-isolated-{uuid.uuid4().hex[:8]}"
    yield tid
    cleanup_sandbox(tid)


def terminal(task_id: str, command: str, timeout: float = 20) -> tuple[dict, str | None]:
    """Run ``command`` through the terminal tool; (its JSON result, the tool error it reports)."""
    raw = dispatch_tool("terminal", {"command": command, "timeout": timeout}, task_id)
    return json.loads(raw), tool_result_error(raw)


def test_commands_run_isolated_with_the_workspace_writable(task_id):
    box = get_sandbox(task_id)
    assert box.isolated
    result, error = terminal(task_id, 'pwd; id -u; echo "$HOME"; echo hi > made.txt')
    assert error is None, result
    assert result["output"].splitlines() == ["/workspace", "1000", "/workspace"]
    assert box.read_file("made.txt") == "hi\n"  # the host sees what the command wrote
    box.write_file("from_reward.txt", "x")  # and the command can change what the host wrote
    result, error = terminal(task_id, "echo y >> from_reward.txt && cat from_reward.txt")
    assert error is None and result["output"] == "xy\n", result


def test_writing_outside_the_workspace_fails_and_changes_nothing_on_the_host(task_id, tmp_path):
    marker = tmp_path / "escaped"
    result, error = terminal(
        task_id, f"touch {marker}; echo x > /etc/hermes-escaped; touch /usr/escaped /escaped"
    )
    assert error == f"exit code {result['exit_code']}" and result["exit_code"] != 0
    assert "Read-only file system" in result["output"]
    assert not marker.exists()
    assert not os.path.exists("/etc/hermes-escaped") and not os.path.exists("/usr/escaped")
    assert not os.path.exists("/escaped")


def test_host_secrets_are_not_visible_in_environment_or_proc(task_id, monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_TEST_SECRET", "sk-isolation-canary-1234")
    secret_file = tmp_path / "key.txt"
    secret_file.write_text("sk-isolation-canary-5678")
    result, error = terminal(
        task_id,
        'cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c CANARY; '
        f"cat {secret_file}; "
        'test -n "$HERMES_TEST_SECRET" || exit 3',
    )
    assert result["exit_code"] == 3 and error == "exit code 3"
    assert "canary" not in result["output"].lower()
    assert "No such file or directory" in result["output"]


def test_no_network_not_even_the_hosts_loopback(task_id):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(3)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    waiter = threading.Thread(target=accept)
    waiter.start()
    try:
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        result, error = terminal(task_id, f'python -c "{script}"')
        outside, _ = terminal(task_id, "python -c \"import socket; "
                              "socket.create_connection(('192.0.2.1', 80), timeout=2)\"")
    finally:
        waiter.join()
        server.close()
    assert error is not None and "ConnectionRefusedError" in result["output"]
    assert outside["exit_code"] != 0 and "unreachable" in outside["output"]
    assert accepted == []


_PYTHON_BOMB = (
    "import os, time\n"
    "while True:\n"
    "    try:\n"
    "        os.fork()\n"
    "    except OSError:\n"
    "        print('fork refused', flush=True); time.sleep(0.05)\n"
)


def _wait_until_gone(box) -> None:
    deadline = time.monotonic() + 3  # SIGKILLed processes take a moment to be reaped
    while (pids := scan(set(), box._marker)[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pids, f"sandbox processes left on the host: {pids}"


def test_fork_bomb_is_capped_and_leaves_nothing_running(task_id):
    box = get_sandbox(task_id)
    box.limits = SandboxLimits(processes=16)
    box.write_file("bomb.py", _PYTHON_BOMB)
    result, error = terminal(task_id, "python bomb.py", 3)
    assert error == "exit code 124", result  # ran into the timeout, then killed whole
    assert "fork refused" in result["output"]  # the process cap held
    _wait_until_gone(box)  # the cap counts the sandbox uid's processes: let the first go
    # A shell bomb whose every level waits on its children (a foreground pipeline): the tree is
    # still running when it reaches the cap, so bash's refused fork always shows in the output.
    # The backgrounded form `bomb | bomb &; wait` was a race: its first level returned at once,
    # the command ended in milliseconds and teardown killed the orphans, sometimes before any
    # fork was refused (a clean-clone CI run saw exit 0 with no output).
    shell, error = terminal(task_id, "bomb() { bomb | bomb; }; bomb", 5)
    assert "Resource temporarily unavailable" in shell["output"], (shell, error)
    _wait_until_gone(box)
    assert terminal(task_id, "echo alive")[0]["output"] == "alive\n"  # still usable


def test_filling_the_disk_is_stopped_by_the_workspace_quota(task_id):
    box = get_sandbox(task_id)
    box.limits = SandboxLimits(workspace_bytes=24 * 1024**2, file_bytes=8 * 1024**2)
    _big, big_error = terminal(task_id, "head -c 32M /dev/zero > big.bin")
    assert big_error is not None and os.path.getsize(os.path.join(box.work_dir, "big.bin")) <= (
        8 * 1024**2
    )  # one file stops at RLIMIT_FSIZE
    result, error = terminal(
        task_id, "i=0; while :; do head -c 4M /dev/zero > f$i.bin; i=$((i+1)); done", 30
    )
    assert error == "exit code 137", result
    assert "quota of 24 MiB" in result["output"]
    used = _bwrap.tree_bytes(box.work_dir, 10**12)
    # stopped near the quota, not at the timeout: with a count every 50 ms a page cache's
    # gigabytes a second ran it 56-64 MiB past; counted as fast as it grows, 0-4 MiB — by
    # the warden, which a busy harness cannot hold up (test_sandbox_quota_warden)
    assert used < 24 * 1024**2 + 64 * 1024**2
    base = box.base_dir
    cleanup_sandbox(task_id)
    assert not os.path.exists(base)


def test_memory_and_cpu_limits_kill_the_command(task_id):
    box = get_sandbox(task_id)
    box.limits = SandboxLimits(memory_bytes=256 * 1024**2, cpu_seconds=1)
    memory, memory_error = terminal(task_id, 'python -c "x = bytearray(1024**3)"')
    assert memory_error is not None and "MemoryError" in memory["output"]
    cpu, cpu_error = terminal(task_id, 'python -c "while True: pass"', 30)
    assert cpu_error is not None and cpu["exit_code"] in (137, 152)  # SIGKILL / SIGXCPU


def test_own_pid_namespace_cannot_see_or_signal_host_processes(task_id):
    result, error = terminal(task_id, "grep CapEff /proc/self/status; ls /proc | grep -cx "
                             f"'[0-9]*'; kill -0 {os.getpid()}")
    assert error is not None
    lines = result["output"].splitlines()
    assert lines[0].split() == ["CapEff:", "0000000000000000"]  # no capabilities at all
    assert int(lines[1]) < 10  # only the sandbox's own processes


def test_background_processes_end_with_their_command(task_id):
    box = get_sandbox(task_id)
    result, error = terminal(task_id, "setsid sleep 1000 >/dev/null 2>&1 & "
                             "nohup sleep 1000 >/dev/null 2>&1 & echo started")
    assert error is None and result["output"] == "started\n"
    deadline = time.monotonic() + 3
    while (pids := scan(set(), box._marker)[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pids, f"background processes outlived their command: {pids}"


def test_required_isolation_without_bwrap_is_a_clear_error(task_id, monkeypatch, tmp_path):
    monkeypatch.setattr(_bwrap, "_PROBE", None)  # probe again, with no bwrap on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(IsolationUnavailableError, match="apt-get install bubblewrap"):
        get_sandbox(task_id)
    monkeypatch.setattr(_bwrap, "_PROBE", None)


def test_auto_falls_back_to_the_host_with_one_warning(task_id, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(_bwrap, "_PROBE", None)
    monkeypatch.setattr(isolation, "_WARNED", False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HERMES_SANDBOX", "auto")
    box = get_sandbox(task_id)
    assert not box.isolated
    assert "WITHOUT kernel isolation" in caplog.text
    monkeypatch.setattr(_bwrap, "_PROBE", None)


def test_bwrap_backend_requires_isolation_whatever_the_policy(task_id, monkeypatch):
    monkeypatch.setenv("HERMES_SANDBOX", "none")
    assert get_sandbox(task_id, "bwrap").isolated
    other = f"{task_id}-plain"
    try:
        assert not get_sandbox(other).isolated
    finally:
        cleanup_sandbox(other)


@pytest.mark.skipif(os.geteuid() != 0, reason="not root: every test above already runs the "
                    "unprivileged command line")
def test_the_command_line_of_an_ordinary_user_is_contained_too(monkeypatch):
    """As root the tests above take the setpriv path; run the unprivileged one as ``nobody``.

    The interpreter's prefixes are left out: here they sit under /root, which nobody cannot
    read (a real user's Python is in their own home or /usr).
    """
    import subprocess
    import tempfile
    from pathlib import Path

    monkeypatch.setattr(_bwrap, "_python_roots", lambda: [])
    # pytest's tmp_path is root's (0700): nobody could not reach a workspace inside it
    workspace = Path(tempfile.mkdtemp(prefix="hermes-nobody-"))
    os.chown(workspace, 65534, 65534)
    command = ("id -u; echo hi > made; touch /etc/x; "
               "(for i in $(seq 40); do sleep 2 & done) 2>&1 | grep -c unavailable; true")
    argv = _bwrap.bwrap_argv(["/bin/bash", "-c", command], work_dir=str(workspace),
                             chdir=_bwrap.WORKSPACE, env={"PATH": "/usr/bin:/bin"},
                             limits=SandboxLimits(processes=20), uid=None)
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"},
                          timeout=60, check=False)
    lines = done.stdout.splitlines()
    made = (workspace / "made").read_text() if (workspace / "made").exists() else None
    shutil.rmtree(workspace)
    assert done.returncode == 0, done.stderr
    assert lines[0] == "1000" and made == "hi\n"
    assert "Read-only file system" in done.stderr and not os.path.exists("/etc/x")
    assert int(lines[1]) > 0  # the process cap refused forks
