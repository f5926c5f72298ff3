"""Workspace contents, content-addressed beside the cassettes.

``<cassettes root>/.workspaces/<sha[:2]>/<sha>`` (the cassettes root as the tokenizer store
finds it: the nearest ancestor folder named ``cassettes``, else the cassette's own folder), so
every cassette of a project shares one store and a file that a hundred rollouts left unchanged
(a repository checkout) is stored once. Plain files, reviewable in git; a blob is written to a
temporary name and renamed into place, never rewritten, so concurrent recorders and a crash
leave at worst an unused blob, never a half one. Reading checks the hash: a store arriving with
a cassette is as untrusted as the cassette.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from hermes_replay._tokenizers.store import store_root
from hermes_replay._world.manifest import WorkspaceError

__all__ = ["WORKSPACE_DIR", "BlobStore", "store_for"]

WORKSPACE_DIR = ".workspaces"


def store_for(cassette: str | Path) -> BlobStore:
    """The store beside the tokenizer store: the same cassettes root (``store_root``)."""
    return BlobStore(store_root(cassette).parent / WORKSPACE_DIR)


class BlobStore:
    """Blobs by sha256 under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if target.is_file():
            return sha
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{sha[:12]}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return sha

    def get(self, sha: str, limit: int) -> bytes:
        """The blob, checked against its name; ``WorkspaceError`` if missing, too big or
        not what its name says."""
        target = self.path(sha)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"blob {sha[:12]}… is missing from {self.root} "
                                 f"({exc.strerror})") from None
        with os.fdopen(fd, "rb") as fh:
            if not _regular(fd):
                raise WorkspaceError(f"blob {sha[:12]}… is not a regular file")
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise WorkspaceError(f"blob {sha[:12]}… is larger than the workspace allows")
        if hashlib.sha256(data).hexdigest() != sha:
            raise WorkspaceError(f"blob {sha[:12]}… in {self.root} does not match its hash "
                                 "(edited or damaged)")
        return data

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
