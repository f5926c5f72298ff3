"""The bubblewrap command line that isolates one sandbox command, and whether bwrap works here.

What one isolated command gets (the boundary the README's fault table describes):

- a new mount namespace whose root is an empty tmpfs with, read-only: ``/usr`` (and the
  ``/bin``, ``/lib`` … links or directories beside it), ``/etc``, and the running Python's
  prefixes (venv and base interpreter) so ``python``/``pytest`` work; nothing else of the host
  (no ``/home``, ``/root``, ``/tmp``, ``/run``, ``/var``, no other project files, no sockets);
- the task's working directory bound read-write at ``/workspace`` — the only writable host
  path — plus a private, size-capped ``/tmp`` and ``/dev/shm``, a minimal ``/dev`` and a
  ``/proc`` of its own;
- new network (loopback only, nothing listening), pid, ipc and uts namespaces; a new session
  (no terminal injection); killed with its parent (``--die-with-parent``); when the command
  ends, everything it started ends with it (the pid namespace's init dies);
- an environment of its own (``--clearenv``, then PATH/HOME/TMPDIR/LANG …): no host secrets;
- rlimits set inside by util-linux ``prlimit``: CPU seconds, address space, processes, file
  size, open files, no core dumps.

Who the command runs as. An ordinary user runs bwrap unprivileged: it makes a user namespace,
the command has no capabilities, and ``RLIMIT_NPROC`` counts only the sandbox's processes.
As root (CI containers, this project's build machine) the kernel ignores ``RLIMIT_NPROC`` for
uid 0 even inside a user namespace, so bwrap runs as root to build the mounts and the command
then drops to a uid of its own (one per sandbox, above any real account) with ``setpriv``:
no capabilities, empty bounding set, ``no_new_privs``. The working directory is given to that
uid; everything else of the host is "other" to it. In both cases the command sees itself as
uid/gid 1000 (through a user namespace), so ``id`` or ``ls -ln`` print the same on every machine.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading

from ._limits import SandboxLimits
from ._tree import tree_bytes  # re-exported: where the quota has been measured from

__all__ = ["WORKSPACE", "bwrap_argv", "bwrap_problem", "pick_sandbox_uid", "tree_bytes"]

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
#: the uid/gid a command sees, on every machine (tool output such as ``ls -ln`` stays stable)
INSIDE_ID = 1000
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PROBE: tuple[str | None] | None = None
_PROBE_LOCK = threading.Lock()
# uids handed to root-mode sandboxes: far above real accounts and subuid ranges, below 2**31
# (the kernel refuses larger ids in a uid map), random so concurrent runs do not share one.
_UID_LOW, _UID_HIGH = 1_500_000_000, 2_000_000_000


def pick_sandbox_uid() -> int | None:
    """A fresh uid for a root-mode sandbox; None when not root (bwrap maps the caller)."""
    if os.geteuid() != 0:
        return None
    return _UID_LOW + secrets.randbelow(_UID_HIGH - _UID_LOW)


def _python_roots() -> list[str]:
    """Host directories the running interpreter needs, outside ``/usr`` (already bound)."""
    roots: set[str] = set()
    exe_root = os.path.dirname(os.path.dirname(sys.executable))
    for path in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, exe_root,
                 os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        for candidate in (os.path.abspath(path), os.path.realpath(path)):
            if os.path.isdir(candidate) and not candidate.startswith("/usr/"):
                roots.add(candidate)
    # A root inside another is covered by it.
    return sorted(r for r in roots if not any(r != o and r.startswith(o + "/") for o in roots))


def _mount_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRS:
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--ro-bind", "/etc", "/etc"]
    return args


def _python_args() -> list[str]:
    """Binds of the interpreter's prefixes. They come after the private ``/tmp``: a venv under
    ``/tmp`` (a CI clone) would otherwise be hidden by it, and ``python`` not found."""
    args: list[str] = []
    made: set[str] = set()
    for root in _python_roots():
        # bwrap creates missing parents with the host's modes (often 0700 under /root);
        # make them traversable so the dropped uid can reach the interpreter.
        parent, chain = os.path.dirname(root), []
        while parent not in ("/", ""):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(chain):
            if directory not in made:
                made.add(directory)
                args += ["--perms", "0755", "--dir", directory]
        args += ["--ro-bind", os.path.realpath(root), root]
    return args


def bwrap_argv(
    command: list[str],
    *,
    work_dir: str,
    chdir: str,
    env: dict[str, str],
    limits: SandboxLimits,
    uid: int | None,
) -> list[str]:
    """The full argv running ``command`` isolated, with ``work_dir`` at ``/workspace``."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    if uid is None:
        args += ["--unshare-user", "--uid", str(INSIDE_ID), "--gid", str(INSIDE_ID)]
    args += _mount_args()
    tmpfs = str(limits.tmpfs_bytes)
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", tmpfs, "--tmpfs", "/tmp",
             "--perms", "1777", "--size", tmpfs, "--tmpfs", "/dev/shm",
             *_python_args(),
             "--bind", work_dir, WORKSPACE, "--chdir", chdir]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args.append("--")
    if uid is not None:
        args += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
                 # a user namespace of its own, so the command sees the same uid as above
                 "unshare", "--user", f"--map-user={INSIDE_ID}", f"--map-group={INSIDE_ID}", "--"]
    cpu = limits.cpu_seconds
    args += ["prlimit", f"--cpu={cpu}:{cpu + 1}", f"--as={limits.memory_bytes}",
             f"--nproc={limits.processes}", f"--fsize={limits.file_bytes}",
             f"--nofile={limits.open_files}", "--core=0", "--", *command]
    return args


def bwrap_problem() -> str | None:
    """Why isolated commands cannot run here, or None when they can. Probed once, cached.

    The probe runs the very command line real commands use (``true`` in a scratch
    workspace), so a kernel without unprivileged user namespaces, a seccomp filter, a
    missing ``setpriv``/``prlimit`` or an old bwrap all show up here, with bwrap's message.
    """
    global _PROBE
    with _PROBE_LOCK:
        if _PROBE is None:
            _PROBE = (_probe(),)
        return _PROBE[0]


def _probe() -> str | None:
    missing = [tool for tool in ("bwrap", "prlimit") if shutil.which(tool) is None]
    uid = pick_sandbox_uid()
    if uid is not None:
        missing += [tool for tool in ("setpriv", "unshare") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH"
    scratch = tempfile.mkdtemp(prefix="hermes-bwrap-probe-")
    try:
        if uid is not None:
            os.chown(scratch, uid, uid)
        argv = bwrap_argv(["/bin/sh", "-c", "echo ok > probe"], work_dir=scratch,
                          chdir=WORKSPACE, env={"PATH": "/usr/bin:/bin"},
                          limits=SandboxLimits(), uid=uid)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap could not start: {exc}"
        if done.returncode != 0 or not os.path.isfile(os.path.join(scratch, "probe")):
            message = (done.stderr or done.stdout).decode(errors="replace").strip()
            return f"bwrap failed (exit {done.returncode}): {message or 'no output'}"
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
