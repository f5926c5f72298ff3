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

Kernel isolation: where bubblewrap works (and ``HERMES_SANDBOX`` is not ``none``), each command
runs inside bwrap with the working directory bound at a real ``/workspace`` — read-only host
system, no network, own pid namespace, rlimits, a workspace quota (see ``_bwrap`` and
``isolation``). Background jobs then end with their command. Without bwrap, isolation is by
directory and process group only: a command can ``cd /``, read the host and use the network.
Either way file tools (``resolve``) refuse paths that resolve outside the working directory,
symlinks included, and the environment is minimal (PATH, locale, HOME, TMPDIR) so host
secrets such as API keys are not passed to the agent's shell; the running interpreter's
directory is first on PATH, so ``python``/``pytest`` are the ones of this venv.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ._bwrap import WORKSPACE, bwrap_argv, pick_sandbox_uid, tree_bytes
from ._host_io import CopyLimits, HostReadError, copy_out, read_regular
from ._limits import SandboxLimits
from ._output import read_capped
from ._procs import MARKER_VAR, children_of, group_members, scan, signal_group, signal_pid
from ._tree import remove_tree
from ._warden import QUOTA_CHECK_MIN_S, Warden, next_quota_check, warden
from .base import RunResult, SandboxBackend, cleanup_all_sandboxes, register_backend
from .isolation import decide_isolation

__all__ = ["VIRTUAL_WORKDIR", "IsolatedSandbox", "LocalSandbox", "group_members", "sandbox_root"]

log = logging.getLogger(__name__)

_ROOT: str | None = None
_ROOT_PID: int | None = None
_ROOT_LOCK = threading.Lock()
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
        if remove_tree(path):
            removed.append(path)
    return removed


def _remove_root(root: str) -> None:
    cleanup_all_sandboxes()
    remove_tree(root)


def _slug(task_id: str) -> str:
    # The hash keeps ids apart that sanitise to the same text ("a/b" vs "a_b").
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:12]
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", task_id)[:40].strip(".") or "task"
    return f"{clean}-{digest}"


@register_backend
class LocalSandbox(SandboxBackend):
    """A directory and the process groups of one task on this machine."""

    name = "local"
    #: output beyond this many characters is cut in the middle, with a marker
    max_output_chars: int = 50_000
    #: seconds between SIGTERM and SIGKILL at cleanup
    kill_grace: float = 1.0
    #: largest file a host-side read (file tools, ``patch``) takes from the sandbox
    max_read_bytes: int = 16 * 1024**2
    #: bounds of a copy out (``download``: ``ToolContext.download_file``/``download_dir``)
    copy_limits: CopyLimits = CopyLimits()

    def __init__(self, task_id: str, isolation: str | None = None) -> None:
        super().__init__(task_id)
        #: True when commands run inside bubblewrap (see ``isolation``); decided once, here
        self.isolated = decide_isolation(task_id, isolation)
        #: rlimits and workspace quota of isolated commands (tests shrink them)
        self.limits = SandboxLimits()
        self.base_dir = os.path.join(sandbox_root(), _slug(task_id))
        self.work_dir = os.path.join(self.base_dir, "work")
        self.tmp_dir = os.path.join(self.work_dir, ".tmp")
        os.makedirs(self.work_dir, exist_ok=True)
        os.makedirs(self.tmp_dir, exist_ok=True)
        self._work_real = os.path.realpath(self.work_dir)
        # As root, isolated commands run as a uid of their own that owns only the workspace.
        self._uid = pick_sandbox_uid() if self.isolated else None
        self._give_to_sandbox(self.work_dir)
        self._marker = secrets.token_hex(8)
        self._pgids: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False

    # -- processes -------------------------------------------------------------------------

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        home, tmp = self.work_dir, self.tmp_dir
        path = os.environ.get("PATH", os.defpath)
        if self.isolated:  # the paths as the command sees them inside bwrap
            home, tmp = WORKSPACE, f"{WORKSPACE}/.tmp"
            path = "/usr/local/bin:/usr/bin:/bin"
        env = {
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), path]),
            "HOME": home,
            "TMPDIR": tmp,
            "TMP": tmp,
            "TEMP": tmp,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra or {})
        env[MARKER_VAR] = self._marker
        return env

    def _argv(self, cmd: str, workdir: str, env: dict[str, str] | None) -> list[str]:
        shell = shutil.which("bash") or "/bin/sh"
        if not self.isolated:
            return [shell, "-c", self.to_host(cmd)]
        inside = os.path.relpath(workdir, self._work_real)
        chdir = WORKSPACE if inside == "." else f"{WORKSPACE}/{inside}"
        return bwrap_argv([shell, "-c", cmd], work_dir=self.work_dir, chdir=chdir,
                          env=self._env(env), limits=self.limits, uid=self._uid)

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
        if not os.path.isdir(self.tmp_dir):  # the agent may have deleted it
            os.makedirs(self.tmp_dir, exist_ok=True)
            self._give_to_sandbox(self.tmp_dir)
        # Capture outside the working directory, where the agent cannot delete or see it.
        with tempfile.TemporaryFile(dir=self.base_dir) as out:
            proc = subprocess.Popen(
                self._argv(cmd, workdir, env),
                cwd=self.base_dir if self.isolated else workdir,
                # bwrap itself gets no host variables either: its pid-1 helper is visible
                # inside, and /proc/1/environ would show them
                env=_BWRAP_ENV if self.isolated else self._env(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with self._lock:
                self._pgids.add(proc.pid)
            stopped = self._wait(proc, timeout)
            output, truncated = self._read_capped(out)
            output = self.to_virtual(output)
        try:  # forget groups that are already empty: their number may be reused later
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            with self._lock:
                self._pgids.discard(proc.pid)
        except PermissionError:
            pass
        if stopped == "timeout":
            output += (
                f"\n[command timed out after {timeout:g}s; it and every process it started "
                "were killed]"
            )
            return RunResult(output=output, exit_code=124, timed_out=True, truncated=truncated)
        if stopped == "quota" or self._over_quota():
            output += (
                f"\n[the working directory grew past its quota of "
                f"{self.limits.workspace_bytes // 1024**2} MiB; the command and every process "
                "it started were killed]"
            )
            return RunResult(output=output, exit_code=137, truncated=truncated)
        code = proc.returncode
        if code < 0:  # killed by a signal: report it the way a shell does
            code = 128 - code
        return RunResult(output=output, exit_code=code, truncated=truncated)

    def _wait(self, proc: subprocess.Popen, timeout: float) -> str | None:
        """Wait for ``proc``; kill its group on timeout or (isolated) a full workspace.

        The workspace is the one writable host path of an isolated command, so its size is
        counted while the command runs — by the quota warden, a process of its own (see
        ``_warden``): counted here, in a thread of the harness, the count waited for the GIL
        while other rollouts ran, and a write loop ran hundreds of MiB past its quota. Where
        no warden can start, this thread counts.
        """
        deadline = time.monotonic() + timeout
        if not self.isolated:
            if self._wait_until(proc, deadline) is None:
                return None
            return self._stop(proc, "timeout")
        guard = warden()
        key = self._watch(guard, proc)
        try:
            while key is not None:
                # a warden that died mid-command (OOM killer, a stray kill) is started again
                if self._wait_until(proc, min(deadline, time.monotonic() + 0.5)) is None:
                    return None
                if time.monotonic() >= deadline:
                    return self._stop(proc, "timeout")
                if not guard.alive():
                    key = self._watch(guard, proc)
            return self._count_here(proc, deadline)
        finally:
            guard.unwatch(key)

    def _watch(self, guard: Warden, proc: subprocess.Popen) -> str | None:
        if "\n" in self.work_dir:
            return None  # the warden's commands are lines
        return guard.watch(proc.pid, self.work_dir, self.limits.workspace_bytes)

    def _wait_until(self, proc: subprocess.Popen, deadline: float) -> str | None:
        """Wait for ``proc`` until ``deadline``; None if it ended, else "timeout" (not killed).

        Through a pidfd where there is one (Linux 5.3): ``Popen.wait(timeout)`` polls with
        sleeps growing to 50 ms, and a ``sleep 0.06`` was seen to end at 118 ms (79 ms here)."""
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(proc.pid)
            try:
                while proc.returncode is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return "timeout"
                    if select.select([pidfd], [], [], left)[0]:
                        proc.wait()
            finally:
                os.close(pidfd)
            return None
        while True:
            left = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(0.0, left))
                return None
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    return "timeout"
                # woke a hair before the deadline: wait the rest

    def _count_here(self, proc: subprocess.Popen, deadline: float) -> str | None:
        """Without a warden: count the workspace in this thread while ``proc`` runs."""
        interval = QUOTA_CHECK_MIN_S
        last: tuple[float, int] | None = None  # (when, bytes) of the last count
        while True:
            left = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(0.0, min(left, interval)))
                return None
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() >= deadline:
                return self._stop(proc, "timeout")
            started = time.monotonic()
            quota = self.limits.workspace_bytes
            used = tree_bytes(self.work_dir, quota)
            now = time.monotonic()
            if used > quota:
                return self._stop(proc, "quota")
            interval = next_quota_check(interval, quota - used, last, (now, used),
                                        counting=now - started)
            last = (now, used)

    def _stop(self, proc: subprocess.Popen, why: str) -> str:
        if self.isolated:
            # Kill the namespace's init first and let bwrap reap it: the kernel then kills
            # every process of the pid namespace, whatever session it moved to.
            for child in children_of(proc.pid):
                signal_pid(child, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        return why

    def _over_quota(self) -> bool:
        if not self.isolated:
            return False
        quota = self.limits.workspace_bytes
        return tree_bytes(self.work_dir, quota) > quota

    def _give_to_sandbox(self, path: str) -> None:
        """Root mode: make ``path`` (and what is under it) the sandbox uid's, so it can write.

        Host-side writes (``write_file``, ``upload``) run as root; without this the command
        could read but not change the files the reward put there.
        """
        if self._uid is None:
            return
        uid = self._uid
        os.chown(path, uid, uid, follow_symlinks=False)
        if os.path.isdir(path) and not os.path.islink(path):
            for parent, dirs, files in os.walk(path):
                for name in dirs + files:
                    with contextlib.suppress(OSError):
                        os.chown(os.path.join(parent, name), uid, uid, follow_symlinks=False)

    def _read_capped(self, fh) -> tuple[str, bool]:
        return read_capped(fh, self.max_output_chars)

    def processes(self) -> list[int]:
        """Live processes of this sandbox (its process groups plus marked escapees)."""
        with self._lock:
            pgids = set(self._pgids)
        return sorted(scan(pgids, self._marker, self._work_real)[1])

    def _kill_all(self) -> None:
        with self._lock:
            pgids = set(self._pgids)
        for sig, wait in ((signal.SIGTERM, self.kill_grace), (signal.SIGKILL, 2.0)):
            groups, pids = scan(pgids, self._marker, self._work_real)
            for pg in groups:
                signal_group(pg, sig)
            for pid in pids:
                signal_pid(pid, sig)
            deadline = time.monotonic() + wait
            while pids and time.monotonic() < deadline:
                time.sleep(0.02)
                pids = scan(pgids, self._marker, self._work_real)[1]
            if not pids:
                return
        log.warning("sandbox %s: processes %s survived SIGKILL", self.task_id, sorted(pids))

    def cleanup(self) -> None:
        self._closed = True
        self._kill_all()
        with self._lock:
            self._pgids.clear()

        # the agent may have chmod'ed folders shut; remove_tree opens them without ever
        # following a link (a chmod through one would change a host file)
        if not remove_tree(self.base_dir):
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

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """A regular file's bytes, read without following a link or blocking (``_host_io``);
        a file larger than ``limit`` (default ``max_read_bytes``) is refused, not cut, so a
        caller that writes it back (``patch``) never truncates it."""
        limit = self.max_read_bytes if limit is None else limit
        data, size = read_regular(self._work_real, self.resolve(path), limit + 1, shown=path)
        if len(data) > limit:
            raise HostReadError(f"{path} is {max(size, len(data))} bytes, more than the "
                                f"{limit} a host-side read takes from a sandbox")
        return data

    def read_head(self, path: str, limit: int) -> tuple[bytes, int]:
        """At most ``limit`` bytes read, whatever the file's size (a 500 MB sparse file costs
        ``limit``, not 500 MB); the size comes from ``fstat``. Same guarded open as
        ``read_bytes``."""
        return read_regular(self._work_real, self.resolve(path), limit, shown=path)

    def read_file(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(content)
        self._hand_over(target)
        return os.path.relpath(target, self._work_real)

    def upload(self, local_path: str, remote_path: str) -> None:
        target = self.resolve(remote_path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(local_path):
            shutil.copytree(local_path, target, dirs_exist_ok=True)
        else:
            shutil.copy2(local_path, target)
        self._hand_over(target)

    def _hand_over(self, target: str) -> None:
        """Root mode: ``target`` and the folders made for it belong to the sandbox uid."""
        if self._uid is None:
            return
        parent = os.path.dirname(target)
        while parent.startswith(self._work_real + os.sep):
            os.chown(parent, self._uid, self._uid, follow_symlinks=False)
            parent = os.path.dirname(parent)
        self._give_to_sandbox(target)

    def download(self, remote_path: str, local_path: str) -> None:
        """Copy out regular files only, never through a link, within ``copy_limits``; what
        was skipped is logged (see ``_host_io``)."""
        source = self.resolve(remote_path)
        parent = os.path.dirname(os.path.abspath(local_path))
        os.makedirs(parent, exist_ok=True)
        report = copy_out(self._work_real, source, local_path, self.copy_limits,
                          shown=remote_path)
        if report.skipped:
            log.warning("sandbox %s: download of %s skipped %s", self.task_id, remote_path,
                        ", ".join(f"{k} ({v})" for k, v in sorted(report.skipped.items())))


@register_backend
class IsolatedSandbox(LocalSandbox):
    """``terminal_backend="bwrap"``: a local sandbox that must run its commands in bubblewrap.

    The one-line way to ask for isolation whatever ``HERMES_SANDBOX`` says; creating it fails
    with ``IsolationUnavailableError`` where bwrap does not work.
    """

    name = "bwrap"

    def __init__(self, task_id: str, isolation: str | None = "bwrap") -> None:
        super().__init__(task_id, isolation="bwrap")


_BWRAP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
