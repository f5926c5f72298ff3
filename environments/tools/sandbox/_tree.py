"""Walking a sandbox's working directory from the host: measuring it and removing it.

Without root (bubblewrap unprivileged), the agent's commands run as the same user as the
host process, so the agent can ``chmod 300`` a folder: the host can then neither list it —
a quota that skips unreadable folders lets files hide there — nor empty it, so cleanup has to
make folders accessible again. Changing modes is where a sandbox can trick the host: a name
checked as a folder can be swapped for a link before ``chmod(name)``, which then changes a
host file. So a folder is opened with ``O_PATH|O_NOFOLLOW|O_DIRECTORY`` (a link or a file
fails to open) and its mode changed through ``/proc/self/fd/N`` (the very inode opened, never
a name looked up again); files and links are never chmod'ed at all — unlinking needs only
the folder's permission. The quota check restores the mode it changed.

Only the standard library: tests run this module alone as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator

__all__ = ["remove_tree", "tree_bytes"]

_PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _chmod_fd(fd: int, mode: int) -> None:
    os.chmod(f"/proc/self/fd/{fd}", mode)


@contextlib.contextmanager
def _opened_dir(name: str, dir_fd: int | None, *, restore: bool) -> Iterator[int | None]:
    """A readable descriptor of the folder ``name`` (relative to ``dir_fd``), made readable
    for the owner through an ``O_PATH`` descriptor if it was not; None if it cannot be opened
    (a link, gone, another user's). ``restore`` puts the old mode back afterwards."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        fd = None
    except OSError:
        yield None
        return
    old_mode = None
    if fd is None:  # chmod 300 / 000: open it as a path (no permission needed), then fix it
        try:
            path_fd = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
        except OSError:
            yield None
            return
        try:
            old_mode = stat.S_IMODE(os.fstat(path_fd).st_mode)
            _chmod_fd(path_fd, old_mode | stat.S_IRWXU)
            # the magic link leads to the inode opened above (so no O_NOFOLLOW here)
            fd = os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_DIRECTORY |
                         os.O_CLOEXEC)
        except OSError:
            if old_mode is not None:
                with contextlib.suppress(OSError):
                    _chmod_fd(path_fd, old_mode)
            os.close(path_fd)
            yield None
            return
        if not restore:
            os.close(path_fd)
            path_fd = None
    else:
        path_fd = None
    try:
        yield fd
    finally:
        os.close(fd)
        if path_fd is not None:
            with contextlib.suppress(OSError):
                _chmod_fd(path_fd, old_mode)  # type: ignore[arg-type]
            os.close(path_fd)


def tree_bytes(path: str, stop_at: int) -> int:
    """Disk blocks used under ``path`` in bytes; stops counting once past ``stop_at``.

    Allocated blocks, not apparent sizes: a sparse file fills no disk. A folder its owner
    made unreadable is counted too (see the module docstring), and left as it was.
    """
    total = 0

    def walk(name: str, dir_fd: int | None) -> bool:
        nonlocal total
        with _opened_dir(name, dir_fd, restore=True) as fd:
            if fd is None:
                return False
            with os.scandir(fd) as entries:
                subdirs = []
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if total > stop_at:
                        return True
                    if stat.S_ISDIR(info.st_mode):
                        subdirs.append(entry.name)
            return any(walk(sub, fd) for sub in subdirs)

    walk(path, None)
    return total


def _open_all(name: str, dir_fd: int | None) -> None:
    """Give the owner rwx on every folder below (and at) ``name``, never following a link."""
    with _opened_dir(name, dir_fd, restore=False) as fd:
        if fd is None:
            return
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if mode & stat.S_IRWXU != stat.S_IRWXU:
                os.fchmod(fd, mode | stat.S_IRWXU)  # the descriptor's own inode, no name
        try:
            with os.scandir(fd) as entries:
                subdirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for sub in subdirs:
            _open_all(sub, fd)


def remove_tree(path: str) -> bool:
    """Remove ``path`` and everything under it, whatever modes the agent left; True if gone.

    Never raises for what is inside: an entry that cannot go stays (the caller logs it)."""
    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return not os.path.lexists(path)
    _open_all(path, None)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):  # something changed meanwhile (a live process): once more
        _open_all(path, None)
        shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)

