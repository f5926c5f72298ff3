"""Without kernel isolation (``HERMES_SANDBOX=none``), cleanup still ends a background process
that left both the command's process group and the sandbox's environment marker behind
(issue 25, item 17): it is found by the folder it works in."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from environments.tool_context import ToolContext


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _is_sleep(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")[0].endswith(b"sleep")
    except OSError:
        return False


@pytest.mark.parametrize("command", [
    "env -u HERMES_SANDBOX_ID setsid nohup sleep 1000 >/dev/null 2>&1 & echo $!",
    "env -i PATH=/usr/bin:/bin setsid nohup sleep 1000 >/dev/null 2>&1 & echo $!",
])
def test_cleanup_ends_an_unmarked_setsid_process(monkeypatch, command):
    monkeypatch.setenv("HERMES_SANDBOX", "none")
    ctx = ToolContext(f"escapee-{uuid.uuid4().hex[:8]}")
    pid = int(ctx.terminal(command, timeout=20)["output"].strip())
    try:
        deadline = time.monotonic() + 10
        while not _is_sleep(pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # `env` has not exec'd setsid/sleep yet (a busy machine)
        assert _alive(pid) and _is_sleep(pid)
        with open(f"/proc/{pid}/environ", "rb") as fh:
            assert b"HERMES_SANDBOX_ID" not in fh.read()  # really unmarked
        ctx.cleanup()
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the process survived the sandbox's cleanup"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
