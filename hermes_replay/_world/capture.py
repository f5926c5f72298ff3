"""Capturing a sandbox's working tree when a rollout's reward starts.

The tree is the agent's: anything in it may be hostile (a link to ``/etc/passwd``, a FIFO that
blocks a reader, a 50 MB file, a key it printed into ``.env``). So the walk never follows a
link (a link is kept only as a link, and only when its target stays inside the tree), opens
only regular files (``O_NOFOLLOW | O_NONBLOCK``, checked with ``fstat`` after opening: the
name may have been swapped), stops at ``limit`` bytes and ``MAX_ENTRIES`` entries, and scrubs
every file's bytes and every name with the recorder's one secret rule set before a byte is
stored. What was left out is listed with its reason.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import redact_bytes, redact_text
from hermes_replay._world.manifest import Workspace, link_stays_inside
from hermes_replay._world.store import BlobStore

__all__ = ["DEFAULT_LIMIT", "MAX_ENTRIES", "capture_workspace"]

#: bytes of file content kept per rollout (``record --workspace-limit`` changes it)
DEFAULT_LIMIT = 8 * 1024 * 1024
MAX_ENTRIES = 20_000
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


# raw sha256 → (the secret rules' generation, stored sha256, stored size): a file that many
# rollouts of a group share (a checkout) is scrubbed and stored once, then only hashed
_SEEN: dict[str, tuple[int, str, int]] = {}
_SEEN_MAX = 50_000


def _stored(store: BlobStore, data: bytes) -> tuple[str, int]:
    raw = hashlib.sha256(data).hexdigest()
    seen = _SEEN.get(raw)
    if seen is not None and seen[0] == KNOWN.generation and store.has(seen[1]):
        return seen[1], seen[2]
    clean = _scrub(data)
    sha = store.put(clean)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()
    _SEEN[raw] = (KNOWN.generation, sha, len(clean))
    return sha, len(clean)


def _scrub(data: bytes) -> bytes:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return redact_bytes(data)
    clean = redact_text(text)
    return data if clean == text else clean.encode("utf-8")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


class _Walk:
    def __init__(self, store: BlobStore, limit: int) -> None:
        self.store, self.ws = store, Workspace(limit=limit)
        self.entries = 0

    def omit(self, path: str, size: int, reason: str) -> None:
        self.ws.omitted.append({"path": path, "size": size, "reason": reason})

    def folder(self, dir_fd: int, prefix: str) -> None:
        try:
            names = sorted(os.listdir(dir_fd))
        except OSError as exc:
            self.omit(prefix or ".", 0, f"folder not readable ({exc.strerror})")
            return
        for name in names:
            rel = f"{prefix}{name}"
            shown = redact_text(rel)
            if shown != rel:  # a secret in a file name: neither name nor content is kept
                self.omit(shown, 0, "its name holds a secret")
                continue
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                self.omit(rel, 0, f"more than {MAX_ENTRIES} entries in the workspace")
                return
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue  # gone since it was listed
            if stat.S_ISLNK(st.st_mode):
                self.link(dir_fd, name, rel)
            elif stat.S_ISDIR(st.st_mode):
                self.subfolder(dir_fd, name, rel, st)
            elif stat.S_ISREG(st.st_mode):
                self.file(dir_fd, name, rel, st)
            else:
                self.omit(rel, 0, _kind(st.st_mode))

    def link(self, dir_fd: int, name: str, rel: str) -> None:
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError:
            return
        if link_stays_inside(rel, target) and redact_text(target) == target:
            self.ws.links.append({"path": rel, "target": target})
        else:  # neither the target's name nor its content is kept
            self.omit(rel, 0, "a link that leaves the workspace (not followed)")

    def subfolder(self, dir_fd: int, name: str, rel: str, st: os.stat_result) -> None:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            self.omit(rel, 0, f"folder not readable ({exc.strerror})")
            return
        try:
            self.ws.dirs.append({"path": rel, "mode": stat.S_IMODE(st.st_mode) & 0o777})
            self.folder(fd, rel + "/")
        finally:
            os.close(fd)

    def file(self, dir_fd: int, name: str, rel: str, st: os.stat_result) -> None:
        room = self.ws.limit - self.ws.bytes
        if st.st_size > room:
            self.omit(rel, st.st_size, "over the workspace limit")
            return
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            self.omit(rel, st.st_size, f"not readable ({exc.strerror})")
            return
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):  # swapped after the listing
                self.omit(rel, 0, _kind(opened.st_mode))
                return
            data = fh.read(room + 1)
        if len(data) > room:  # grew after the listing
            self.omit(rel, len(data), "over the workspace limit")
            return
        sha, size = _stored(self.store, data)
        self.ws.files.append({"path": rel, "mode": stat.S_IMODE(opened.st_mode) & 0o777,
                              "size": size, "sha256": sha})
        self.ws.bytes += size


def capture_workspace(root: str | Path, store: BlobStore, limit: int = DEFAULT_LIMIT
                      ) -> Workspace:
    """The working tree under ``root`` as a ``Workspace``; contents go into ``store``."""
    walk = _Walk(store, limit)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        walk.omit(".", 0, f"the workspace could not be opened ({exc.strerror})")
        return walk.ws
    try:
        walk.folder(fd, "")
    finally:
        os.close(fd)
    return walk.ws
