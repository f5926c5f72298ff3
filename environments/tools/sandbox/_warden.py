"""The quota warden: a small process of its own that counts the workspaces of running isolated
commands and kills a command whose workspace grew past its quota.

Why a process and not a thread of the harness: the count is Python (``_tree.tree_bytes``), and
in the harness it competes for the GIL with everything else the harness runs — other
rollouts' agent loops, tokenizers, the event loop. One busy thread was enough to delay a count
by hundreds of milliseconds, and a write loop on a page cache ran 330 MiB past a 24 MiB quota
meanwhile (a full suite on two loaded cores: 72 MiB past it). The warden has its own
interpreter and nothing else to do, so the next count comes when it is due.

One warden serves every sandbox of a process; it starts with the first isolated command, is
told over a pipe which command to watch (``W``) and to stop watching (``U``), and ends when
that pipe closes (the harness ended, however it ended). It loads only this file and
``_tree.py``, by path, in an interpreter started with ``-I``: nothing from the working folder,
the environment or the user's site can be imported into a process that kills on its own.

A command is known by its pid *and* its start time (``/proc/<pid>/stat``): a pid is reused
once its process is reaped, and a warden that acted on the number alone could kill a stranger.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

try:
    from ._tree import tree_bytes
except ImportError:  # loaded by path in the warden process (see ``_BOOT``)
    from _tree import tree_bytes  # type: ignore[no-redef]

__all__ = ["QUOTA_CHECK_MAX_S", "QUOTA_CHECK_MIN_S", "Warden", "next_quota_check", "warden"]

QUOTA_CHECK_MIN_S = 0.002  # a command's workspace is first counted this soon after it starts
QUOTA_CHECK_MAX_S = 0.05  # and at least this often while it runs


def next_quota_check(interval: float, room: int, last: tuple[float, int] | None,
                     now: tuple[float, int], *, counting: float) -> float:
    """Seconds until a running command's workspace is counted again.

    ``room`` is what is left of the quota; ``last`` and ``now`` are (time, bytes) of the
    previous count and this one. While the workspace grows, the next count comes before the
    rest of the room could fill at the rate just seen (half that time), so a write loop is
    stopped a few milliseconds past the quota however fast the disk; while it does not, the
    wait doubles up to ``QUOTA_CHECK_MAX_S``. Never under ten times what counting took (a huge
    workspace costs at most a tenth of a core to watch).
    """
    grown = now[1] - last[1] if last is not None else 0
    elapsed = now[0] - last[0] if last is not None else 0.0
    if grown > 0 and elapsed > 0:
        wait = room / (grown / elapsed) / 2
    else:
        wait = interval * 2
    wait = min(QUOTA_CHECK_MAX_S, max(QUOTA_CHECK_MIN_S, wait))
    return max(wait, 10 * counting)


# ---------------------------------------------------------------- the warden process's side


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (field 22 of its stat), None once it is gone or a
    zombie: with the pid, what tells this process from a later one given the same number."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # state ppid pgrp … starttime is the 20th
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return []


def _kill(pid: int, born: str) -> None:
    """Kill a watched bwrap: its child first (the pid namespace's init, whose death takes
    every process of the namespace with it), then bwrap — each only while still the one
    watched."""
    for child in _children(pid):
        child_born = start_time(child)
        if start_time(pid) == born and child_born is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
    if start_time(pid) == born:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class _Watched:
    __slots__ = ("born", "due", "interval", "last", "path", "pid", "quota")

    def __init__(self, pid: int, born: str, quota: int, path: str) -> None:
        self.pid, self.born, self.quota, self.path = pid, born, quota, path
        self.interval = QUOTA_CHECK_MIN_S
        self.due = time.monotonic() + QUOTA_CHECK_MIN_S
        self.last: tuple[float, int] | None = None


def serve(commands: int = 0) -> None:
    """The warden's loop: read ``W id pid quota path`` / ``U id`` lines from ``commands``
    (a file descriptor); count each watched workspace when due; exit at end of input."""
    try:
        # Ahead of the commands it counts when cores are short (a count that waits for a core
        # while the command writes is quota overshoot). It sleeps between counts, so this costs
        # nothing; it needs CAP_SYS_NICE (root, as in CI containers) and is skipped without.
        os.nice(-10)
    except OSError:
        pass
    watched: dict[str, _Watched] = {}
    pending = b""
    while True:
        now = time.monotonic()
        wait = min((w.due for w in watched.values()), default=now + 3600) - now
        readable, _, _ = select.select([commands], [], [], max(0.0, wait))
        if readable:
            chunk = os.read(commands, 65536)
            if not chunk:
                return  # the harness is gone: nothing left to guard
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                _command(watched, line.decode(errors="replace"))
        now = time.monotonic()
        for key, w in list(watched.items()):
            if w.due > now:
                continue
            if start_time(w.pid) != w.born:
                del watched[key]  # ended (and perhaps reaped) before the harness said so
                continue
            began = time.monotonic()
            used = tree_bytes(w.path, w.quota)
            counted = time.monotonic()
            if used > w.quota:
                _kill(w.pid, w.born)
                del watched[key]
                continue
            w.interval = next_quota_check(w.interval, w.quota - used, w.last, (counted, used),
                                          counting=counted - began)
            w.last = (counted, used)
            w.due = counted + w.interval


def _command(watched: dict[str, _Watched], line: str) -> None:
    parts = line.split(" ", 4)
    if parts[0] == "W" and len(parts) == 5:
        _, key, pid, quota, path = parts
        born = start_time(int(pid))
        if born is not None:
            watched[key] = _Watched(int(pid), born, int(quota), path)
    elif parts[0] == "U" and len(parts) == 2:
        watched.pop(parts[1], None)


# ---------------------------------------------------------------- the harness's side

_HERE = os.path.dirname(os.path.abspath(__file__))
# Run by ``python -I``: no working folder, no PYTHON* variables, no user site on the path.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import _warden; _warden.serve()"


class Warden:
    """The harness's handle on its warden process: started on first use, started again if it
    died, one per process (a forked child starts its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._owner = 0
        self._next = 0

    def _send(self, line: str) -> bool:
        """Write one command; starts the warden if there is none (alive, of this process)."""
        with self._lock:
            for _attempt in (1, 2):
                if (self._proc is None or self._owner != os.getpid()
                        or self._proc.poll() is not None):
                    self._start()
                if self._proc is None:
                    return False
                try:
                    assert self._proc.stdin is not None
                    self._proc.stdin.write(line.encode() + b"\n")
                    self._proc.stdin.flush()
                    return True
                except (BrokenPipeError, OSError, ValueError):
                    self._proc = None  # died between the check and the write: once more
            return False

    def _start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _BOOT, _HERE],
                stdin=subprocess.PIPE,
                # not the harness's fds: started during a run, it would hold that run's
                # captured output pipe open for good (and has nothing to say: a warden that
                # fails is started again, or the harness counts itself)
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # a ^C to the harness's terminal is the harness's
            )
            self._owner = os.getpid()
        except OSError:
            self._proc = None

    def watch(self, pid: int, path: str, quota: int) -> str | None:
        """Start counting ``path`` for command ``pid``; the watch's key, or None when no
        warden can run here (the caller then has no fast quota and must count itself)."""
        with self._lock:
            self._next += 1
            key = f"{os.getpid()}-{self._next}"
        return key if self._send(f"W {key} {pid} {quota} {path}") else None

    def unwatch(self, key: str | None) -> None:
        if key is not None:
            self._send(f"U {key}")

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and self._owner == os.getpid() and proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.alive() and self._proc is not None else None


    def _forget(self) -> None:
        """In a forked child: a lock another thread held at the fork would never be released,
        and the parent's warden is the parent's (the child's copy of its pipe is closed, so
        that warden still ends with the parent); the child starts its own when it needs one."""
        self._lock = threading.Lock()
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass


_warden = Warden()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _warden._forget())


def warden() -> Warden:
    """This process's warden."""
    return _warden
