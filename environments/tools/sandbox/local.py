"""The ``local`` sandbox backend: a private directory and tracked process groups per task.

Layout, under one temp root per process (``hermes-sandboxes-<pid>-*``)::

    <root>/<task-slug>-<hash>/work        working directory and HOME; file tools act here
    <root>/<task-slug>-<hash>/work/.tmp   TMPDIR

The agent sees its working directory as ``/workspace``: ``/workspace`` in a command, a ``cwd``
or a file-tool path means the working directory, and the host path is written back as
``/workspace`` in every output. Two reasons: the host path holds a pid and random letters, and
tool output goes into the next model request, so a visible host path would make recorded and
replayed requests differ; and the seed's reward code says ``ctx.terminal("pytest
/workspace/test.py")``, the container layout of the former layer, which then works locally too.
A real host ``/workspace`` is hidden from the agent.

Each command runs as ``bash -c`` in a new session (``start_new_session=True``), so it leads its
own process group and a timeout can kill it together with every child it spawned. Background
jobs (``cmd &``, ``nohup``) stay in that group, which the sandbox remembers until cleanup. A
process that calls ``setsid`` itself leaves the group, so every command also carries a random
marker in its environment (``HERMES_SANDBOX_ID``); cleanup kills any process still carrying it
(scanning ``/proc`` where it exists). Cleanup sends SIGTERM, waits briefly, then SIGKILL, and
only then removes the directory.

Command output goes to an unlinked temporary file, not a pipe: a pipe stays open while any
background child holds it, so ``server &`` would otherwise hang the call until the timeout.

Isolation is by directory and process group, not a security boundary: a command can still
``cd /`` and read the host. File tools (``resolve``) refuse paths that resolve outside the
working directory, symlinks included. The environment is minimal (PATH, locale, HOME, TMPDIR)
so host secrets such as API keys are not passed to the agent's shell; the running
interpreter's directory is first on PATH, so ``python``/``pytest`` are the ones of this venv.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from .base import RunResult, SandboxBackend, cleanup_all_sandboxes, register_backend

__all__ = ["VIRTUAL_WORKDIR", "LocalSandbox", "sandbox_root"]

log = logging.getLogger(__name__)

_ROOT: str | None = None
_ROOT_PID: int | None = None
_ROOT_LOCK = threading.Lock()
_MARKER_VAR = "HERMES_SANDBOX_ID"
#: how the agent sees its working directory (see the module docstring)
VIRTUAL_WORKDIR = "/workspace"
_VIRTUAL_RE = re.compile(r"(?<![\w./~-])/workspace(?![\w.-])")


def sandbox_root() -> str:
    """The per-process temp directory holding every local sandbox (created on first use)."""
    global _ROOT, _ROOT_PID
    with _ROOT_LOCK:
        # A forked child must not share (and later delete) its parent's root.
        if _ROOT is None or _ROOT_PID != os.getpid() or not os.path.isdir(_ROOT):
            remove_stale_roots()
            _ROOT = tempfile.mkdtemp(prefix=f"hermes-sandboxes-{os.getpid()}-")
            _ROOT_PID = os.getpid()
            atexit.register(_remove_root, _ROOT)
        return _ROOT


def remove_stale_roots(tmp: str | None = None) -> list[str]:
    """Delete the sandbox roots of processes that are gone (a SIGKILL skips ``atexit``);
    returns what was removed. A root whose process lives, or is not ours to ask, stays."""
    removed: list[str] = []
    base = tmp or tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        match = re.fullmatch(r"hermes-sandboxes-(\d+)-\w+", name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except OSError:  # alive, another user's
            continue
        path = os.path.join(base, name)
        _make_removable(path)
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
    return removed


def _make_removable(path: str) -> None:
    """An agent may have chmod -w'ed a directory; rmtree would then give up."""
    for dirpath, dirnames, _ in os.walk(path):
        for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
            with contextlib.suppress(OSError):
                if not os.path.islink(d):
                    os.chmod(d, 0o700)


def _remove_root(root: str) -> None:
    cleanup_all_sandboxes()
    shutil.rmtree(root, ignore_errors=True)


def _slug(task_id: str) -> str:
    # The hash keeps ids apart that sanitise to the same text ("a/b" vs "a_b").
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:12]
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", task_id)[:40].strip(".") or "task"
    return f"{clean}-{digest}"


def _live_processes() -> list[tuple[int, int, int]]:
    """(pid, pgid, sid) of every non-zombie process, from ``/proc``; [] where there is none."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                raw = fh.read().decode(errors="replace")
        except OSError:
            continue
        # fields after the ")" closing the command name: state ppid pgrp session ...
        fields = raw[raw.rfind(")") + 2 :].split()
        if len(fields) < 4 or fields[0] == "Z":
            continue
        found.append((int(entry), int(fields[2]), int(fields[3])))
    return found


def _has_marker(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    return [pid for pid, pg, _sid in _live_processes() if pg == pgid]


def _scan(pgids: set[int], marker: str) -> tuple[set[int], set[int]]:
    """The sandbox's live process groups and its live processes, in one pass over /proc.

    A pid number is reused once its process is gone, so a remembered pgid is trusted only
    while a member still proves it is ours: it carries the sandbox marker, or it is in the
    session our command opened (session id == pgid, set by ``start_new_session``).
    """
    if not os.path.isdir("/proc"):  # no /proc (macOS): trust the remembered groups
        live = {pg for pg in pgids if group_members(pg)}
        return live, set(live)
    needle = f"{_MARKER_VAR}={marker}".encode()
    groups: set[int] = set()
    pids: set[int] = set()
    by_group: dict[int, list[int]] = {}
    for pid, pg, sid in _live_processes():
        if pid == os.getpid():
            continue
        marked = _has_marker(pid, needle)
        if marked:
            pids.add(pid)
        if pg in pgids:
            by_group.setdefault(pg, []).append(pid)
            if marked or sid == pg:
                groups.add(pg)
    for pg in groups:
        pids.update(by_group[pg])
    return groups, pids


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


@register_backend
class LocalSandbox(SandboxBackend):
    """A directory and the process groups of one task on this machine."""

    name = "local"
    #: output beyond this many characters is cut in the middle, with a marker
    max_output_chars: int = 50_000
    #: seconds between SIGTERM and SIGKILL at cleanup
    kill_grace: float = 1.0

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.base_dir = os.path.join(sandbox_root(), _slug(task_id))
        self.work_dir = os.path.join(self.base_dir, "work")
        self.tmp_dir = os.path.join(self.work_dir, ".tmp")
        os.makedirs(self.work_dir, exist_ok=True)
        os.makedirs(self.tmp_dir, exist_ok=True)
        self._work_real = os.path.realpath(self.work_dir)
        self._marker = secrets.token_hex(8)
        self._pgids: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False

    # -- processes -------------------------------------------------------------------------

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        path = os.environ.get("PATH", os.defpath)
        env = {
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), path]),
            "HOME": self.work_dir,
            "TMPDIR": self.tmp_dir,
            "TMP": self.tmp_dir,
            "TEMP": self.tmp_dir,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra or {})
        env[_MARKER_VAR] = self._marker
        return env

    def run(
        self,
        cmd: str,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> RunResult:
        if self._closed:
            raise RuntimeError(
                f"sandbox of task {self.task_id!r} was cleaned up; get_sandbox() makes a new one"
            )
        timeout = self.default_timeout if timeout is None else timeout
        workdir = self.resolve(cwd) if cwd else self.work_dir
        shell = shutil.which("bash") or "/bin/sh"
        os.makedirs(self.tmp_dir, exist_ok=True)  # the agent may have deleted it
        # Capture outside the working directory, where the agent cannot delete or see it.
        with tempfile.TemporaryFile(dir=self.base_dir) as out:
            proc = subprocess.Popen(
                [shell, "-c", self.to_host(cmd)],
                cwd=workdir,
                env=self._env(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with self._lock:
                self._pgids.add(proc.pid)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            output, truncated = self._read_capped(out)
            output = self.to_virtual(output)
        try:  # forget groups that are already empty: their number may be reused later
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            with self._lock:
                self._pgids.discard(proc.pid)
        except PermissionError:
            pass
        if timed_out:
            output += (
                f"\n[command timed out after {timeout:g}s; it and every process it started "
                "were killed]"
            )
            return RunResult(output=output, exit_code=124, timed_out=True, truncated=truncated)
        code = proc.returncode
        if code < 0:  # killed by a signal: report it the way a shell does
            code = 128 - code
        return RunResult(output=output, exit_code=code, truncated=truncated)

    def _read_capped(self, fh) -> tuple[str, bool]:
        """Output text, cut in the middle to ``max_output_chars`` (plus a marker) if longer."""
        cap = self.max_output_chars
        head_n, tail_n = cap // 2, cap - cap // 2
        size = fh.seek(0, os.SEEK_END)
        fh.seek(0)
        if size <= 8 * cap:  # small enough to decode whole (UTF-8 is at most 4 bytes a char)
            text = fh.read().decode("utf-8", errors="replace")
            if len(text) <= cap:
                return text, False
            head, tail, omitted = text[:head_n], text[-tail_n:], len(text) - cap
            unit = "characters"
        else:  # huge: never load it all, read 4 bytes per kept character from each end
            head = fh.read(4 * head_n).decode("utf-8", errors="replace")[:head_n]
            fh.seek(size - 4 * tail_n)
            tail = fh.read().decode("utf-8", errors="replace")[-tail_n:]
            omitted = size - len(head.encode()) - len(tail.encode())
            unit = "bytes"
        marker = f"\n[... output truncated: {omitted} {unit} omitted ...]\n"
        return head + marker + tail, True

    def processes(self) -> list[int]:
        """Live processes of this sandbox (its process groups plus marked escapees)."""
        with self._lock:
            pgids = set(self._pgids)
        return sorted(_scan(pgids, self._marker)[1])

    def _kill_all(self) -> None:
        with self._lock:
            pgids = set(self._pgids)
        for sig, wait in ((signal.SIGTERM, self.kill_grace), (signal.SIGKILL, 2.0)):
            groups, pids = _scan(pgids, self._marker)
            for pg in groups:
                _signal_group(pg, sig)
            for pid in pids:
                _signal_pid(pid, sig)
            deadline = time.monotonic() + wait
            while pids and time.monotonic() < deadline:
                time.sleep(0.02)
                pids = _scan(pgids, self._marker)[1]
            if not pids:
                return
        log.warning("sandbox %s: processes %s survived SIGKILL", self.task_id, sorted(pids))

    def cleanup(self) -> None:
        self._closed = True
        self._kill_all()
        with self._lock:
            self._pgids.clear()

        def make_writable_and_retry(func, path, _exc):
            # The agent may have chmod -w'ed a directory; rmtree would then give up.
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(path), stat.S_IRWXU)
                os.chmod(path, stat.S_IRWXU)
                func(path)

        shutil.rmtree(self.base_dir, onerror=make_writable_and_retry)
        if os.path.exists(self.base_dir):
            log.warning("sandbox %s: could not remove %s", self.task_id, self.base_dir)

    # -- files -----------------------------------------------------------------------------

    def to_host(self, text: str) -> str:
        """``/workspace`` (as a path, not inside a longer name) → the host working directory."""
        return _VIRTUAL_RE.sub(lambda _m: self.work_dir, text)

    def to_virtual(self, text: str) -> str:
        """Host working-directory paths in ``text`` → ``/workspace``."""
        for host in sorted({self._work_real, self.work_dir}, key=len, reverse=True):
            text = text.replace(host, VIRTUAL_WORKDIR)
        return text

    def resolve(self, path: str) -> str:
        given = path
        path = self.to_host(path) if path.startswith(VIRTUAL_WORKDIR) else path
        joined = path if os.path.isabs(path) else os.path.join(self.work_dir, path)
        real = os.path.realpath(joined)
        if os.path.commonpath([real, self._work_real]) != self._work_real:
            raise PermissionError(
                f"path {given!r} resolves outside the sandbox of task {self.task_id!r}; "
                "use a path relative to the working directory"
            )
        return real

    def read_file(self, path: str) -> str:
        with open(self.resolve(path), encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(content)
        return os.path.relpath(target, self._work_real)

    def upload(self, local_path: str, remote_path: str) -> None:
        target = self.resolve(remote_path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(local_path):
            shutil.copytree(local_path, target, dirs_exist_ok=True)
        else:
            shutil.copy2(local_path, target)

    def download(self, remote_path: str, local_path: str) -> None:
        source = self.resolve(remote_path)
        parent = os.path.dirname(os.path.abspath(local_path))
        os.makedirs(parent, exist_ok=True)
        if os.path.isdir(source):
            shutil.copytree(source, local_path, dirs_exist_ok=True)
        else:
            shutil.copy2(source, local_path)
