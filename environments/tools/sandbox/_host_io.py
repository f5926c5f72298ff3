"""Host-side reads of sandbox content: regular files only, never through a link, never blocking.

Whatever the agent's commands left in the working directory is hostile input to the host
process that reads it back (file tools, ``ToolContext.download_file``/``download_dir``):

- a symlink (``ln -s /proc/self/environ out/env``) would copy a host file — the recorder's own
  environment, its API key included — into the reward's folder and the cassette;
- a FIFO (``mkfifo f``) blocks a plain ``open()`` forever, in a thread that SIGTERM cannot
  interrupt;
- a link to ``/root`` or a huge file would copy gigabytes.

So every path is opened one component at a time beneath the sandbox root with ``O_NOFOLLOW``
(a link swapped in after ``realpath`` fails instead of being followed), the last one also with
``O_NONBLOCK``, and the open file must be a regular one (``fstat``, not the name). Reads and
copies stop at a byte and a file count and at a deadline. What is skipped is named, never
silently followed.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass, field

__all__ = ["CopyLimits", "HostReadError", "copy_out", "read_regular"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | \
    getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


class HostReadError(OSError):
    """A sandbox path the host refuses to read (a link, a FIFO, a device, over a limit);
    ``reason`` is the short form a copy's report lists for a skipped file."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class CopyLimits:
    """Bounds of one copy out of a sandbox (``download_file``/``download_dir``)."""

    #: total bytes copied (the copy is base64 in the cassette when recorded)
    max_bytes: int = 64 * 1024**2
    #: files copied
    max_files: int = 10_000
    #: seconds the whole copy may take
    max_seconds: float = 60.0


@dataclass
class CopyReport:
    """What a copy wrote, and what it refused to follow or read (path → reason)."""

    files: int = 0
    bytes: int = 0
    skipped: dict[str, str] = field(default_factory=dict)


def _parts(root: str, real: str) -> list[str]:
    rel = os.path.relpath(real, root)
    if rel == ".":
        return []
    parts = rel.split(os.sep)
    if parts[0] == os.pardir or os.path.isabs(rel):
        raise HostReadError(f"{real} lies outside the sandbox {root}")
    return parts


def _open_dir_beneath(root: str, parts: list[str]) -> int:
    """A descriptor of ``root/parts…``, no component of it a link."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except OSError:
        os.close(fd)
        raise
    return fd


def _open_regular_at(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise HostReadError(f"{shown} is a symbolic link; the host never follows links "
                                "out of a sandbox", "symbolic link (never followed)") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise HostReadError(f"{shown} is {kind}; only regular files are read from a sandbox",
                            kind)
    return fd, info


def read_regular(root: str, real: str, limit: int, shown: str | None = None) -> tuple[bytes, int]:
    """The first ``limit`` bytes of the regular file ``real`` (inside ``root``) and its size.

    ``real`` is the already-resolved path; it is opened again beneath ``root`` without
    following any link, so a swap after resolving cannot lead the read out."""
    shown = shown or real
    parts = _parts(root, real)
    if not parts:
        raise HostReadError(f"{shown} is a directory; only regular files are read")
    dir_fd = _open_dir_beneath(root, parts[:-1])
    try:
        fd, info = _open_regular_at(dir_fd, parts[-1], shown)
    finally:
        os.close(dir_fd)
    try:
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), info.st_size
    finally:
        os.close(fd)


def _copy_fd(fd: int, dest: str, budget: int, deadline: float, shown: str,
             limits: CopyLimits) -> int:
    written = 0
    with open(dest, "wb") as out:  # the host chose dest; the source is what is guarded
        while True:
            if time.monotonic() > deadline:
                raise HostReadError(f"copying {shown} out of the sandbox took too long")
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return written
            written += len(chunk)
            if written > budget:
                raise HostReadError(f"{shown}: the copy out of the sandbox passed its limit of "
                                    f"{limits.max_bytes} bytes")
            out.write(chunk)


def copy_out(root: str, real: str, dest: str, limits: CopyLimits = CopyLimits(),
             shown: str | None = None) -> CopyReport:
    """Copy the regular file or folder ``real`` (inside ``root``) to the host path ``dest``.

    Links and special files below a folder are skipped (named in the report); a link or
    special file given as the source itself, or a copy past ``limits``, raises
    ``HostReadError`` (what was copied so far stays, for the caller to remove)."""
    shown = shown or real
    report = CopyReport()
    deadline = time.monotonic() + limits.max_seconds
    parts = _parts(root, real)
    parent_fd = _open_dir_beneath(root, parts[:-1])
    try:
        try:
            top_fd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent_fd) if parts else \
                os.open(root, _DIR_FLAGS)
        except NotADirectoryError:
            fd, _info = _open_regular_at(parent_fd, parts[-1], shown)
            try:
                report.bytes = _copy_fd(fd, dest, limits.max_bytes, deadline, shown, limits)
            finally:
                os.close(fd)
            report.files = 1
            return report
    finally:
        os.close(parent_fd)
    try:
        _copy_dir(top_fd, dest, "", limits, deadline, report, shown)
    finally:
        os.close(top_fd)
    return report


def _copy_dir(dir_fd: int, dest: str, rel: str, limits: CopyLimits, deadline: float,
              report: CopyReport, shown: str) -> None:
    os.makedirs(dest, exist_ok=True)
    for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
        name = entry.name
        where = f"{rel}{name}"
        if time.monotonic() > deadline:
            raise HostReadError(f"copying {shown} out of the sandbox took too long")
        if entry.is_symlink():
            report.skipped[where] = "symbolic link (never followed)"
            continue
        if entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                report.skipped[where] = f"unreadable folder ({exc.strerror})"
                continue
            try:
                _copy_dir(sub, os.path.join(dest, name), f"{where}/", limits, deadline, report,
                          shown)
            finally:
                os.close(sub)
            continue
        try:
            fd, _info = _open_regular_at(dir_fd, name, f"{shown}/{where}")
        except HostReadError as exc:
            report.skipped[where] = exc.reason
            continue
        except OSError as exc:
            report.skipped[where] = f"unreadable ({exc.strerror})"
            continue
        try:
            if report.files >= limits.max_files:
                raise HostReadError(f"copying {shown} out of the sandbox: more than "
                                    f"{limits.max_files} files")
            report.bytes += _copy_fd(fd, os.path.join(dest, name),
                                     limits.max_bytes - report.bytes, deadline,
                                     f"{shown}/{where}", limits)
            report.files += 1
        finally:
            os.close(fd)
