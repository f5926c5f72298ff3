"""Putting a recorded workspace into a fresh sandbox's working tree.

The manifest was checked by ``Workspace.parse`` (relative paths only, links that stay
inside) and every blob is checked against its hash as it is read, so a hand-edited cassette
or store can make a restore fail, never write outside ``root``. Files are created with
``O_EXCL | O_NOFOLLOW`` under folders this function made, so nothing already in the tree (the
tree is fresh; this is a second guard) redirects a write. Folder modes are set last, so a
read-only folder can still be filled first.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_replay._world.manifest import Workspace, WorkspaceError
from hermes_replay._world.store import BlobStore

__all__ = ["restore_workspace"]


def _inside(root: Path, rel: str) -> Path:
    target = root / rel
    parent = target.parent.resolve()
    if parent != root and root not in parent.parents:
        raise WorkspaceError(f"{rel}: its folder resolves outside the workspace")
    return target


def restore_workspace(ws: Workspace, store: BlobStore, root: str | Path) -> int:
    """Write ``ws`` under ``root`` (an empty sandbox working tree); returns files written."""
    base = Path(root).resolve()
    for entry in sorted(ws.dirs, key=lambda d: d["path"]):
        _inside(base, entry["path"]).mkdir(parents=True, exist_ok=True)
    written = 0
    for entry in ws.files:
        data = store.get(entry["sha256"], max(ws.limit, entry["size"]))
        if len(data) != entry["size"]:
            raise WorkspaceError(f"{entry['path']}: blob size differs from the manifest")
        target = _inside(base, entry["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), entry["mode"])
        written += 1
    for entry in ws.links:
        target = _inside(base, entry["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(entry["target"], target)
    for entry in sorted(ws.dirs, key=lambda d: d["path"], reverse=True):
        os.chmod(_inside(base, entry["path"]), entry["mode"] | 0o700)
    return written
