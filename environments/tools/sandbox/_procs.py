"""Finding and signalling a sandbox's processes through ``/proc`` (Linux) or process groups.

A remembered process group is trusted only while a member proves it is the sandbox's (see
``scan``): pid numbers are reused once a process is gone.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["MARKER_VAR", "children_of", "group_members", "scan", "signal_group", "signal_pid"]

#: environment variable carrying each sandbox's random marker into every command it runs
MARKER_VAR = "HERMES_SANDBOX_ID"


def _stats() -> list[tuple[int, list[str]]]:
    """(pid, fields of ``/proc/<pid>/stat`` after the command name) of every live
    (non-zombie) process; [] where there is no ``/proc``."""
    found: list[tuple[int, list[str]]] = []
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
        # the fields after the ")" closing the command name: state ppid pgrp session ...
        fields = raw[raw.rfind(")") + 2 :].split()
        if len(fields) >= 4 and fields[0] != "Z":
            found.append((int(entry), fields))
    return found


def _live_processes() -> list[tuple[int, int, int]]:
    """(pid, pgid, sid) of every non-zombie process."""
    return [(pid, int(f[2]), int(f[3])) for pid, f in _stats()]


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


def _cwd_within(pid: int, root: str) -> bool:
    """Whether process ``pid`` works inside ``root`` (its ``/proc/<pid>/cwd``)."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == root or cwd.startswith(root.rstrip("/") + "/")


def scan(pgids: set[int], marker: str, root: str | None = None
         ) -> tuple[set[int], set[int]]:
    """The sandbox's live process groups and its live processes, in one pass over /proc.

    A pid number is reused once its process is gone, so a remembered pgid is trusted only
    while a member still proves it is ours: it carries the sandbox marker, or it is in the
    session our command opened (session id == pgid, set by ``start_new_session``).

    With ``root`` (the sandbox's real working directory), a process working inside it is the
    sandbox's too: ``env -u HERMES_SANDBOX_ID setsid nohup sleep 1000 &`` leaves both the group
    and the marker behind, but not the folder it was started in. (One that also changes
    directory is out of reach without kernel isolation; under bubblewrap its pid namespace
    ends with the command.)
    """
    if not os.path.isdir("/proc"):  # no /proc (macOS): trust the remembered groups
        live = {pg for pg in pgids if group_members(pg)}
        return live, set(live)
    needle = f"{MARKER_VAR}={marker}".encode()
    groups: set[int] = set()
    pids: set[int] = set()
    by_group: dict[int, list[int]] = {}
    for pid, pg, sid in _live_processes():
        if pid == os.getpid():
            continue
        marked = _has_marker(pid, needle) or (root is not None and _cwd_within(pid, root))
        if marked:
            pids.add(pid)
        if pg in pgids:
            by_group.setdefault(pg, []).append(pid)
            if marked or sid == pg:
                groups.add(pg)
    for pg in groups:
        pids.update(by_group[pg])
    return groups, pids


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def children_of(parent: int) -> list[int]:
    """Live direct children of ``parent`` (from ``/proc``; [] where there is none)."""
    return [pid for pid, fields in _stats() if int(fields[1]) == parent]
