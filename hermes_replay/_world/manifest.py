"""The record of one rollout's workspace, as a cassette keeps it.

The cassette keeps ``{"v": 2, "tree": <root listing sha256>, …}`` in the rollout's outcome
under ``"workspace"`` (``_world.trees``: folder listings are blobs, shared between rollouts);
expanded, or as written by the first version, it is this flat form (still read)::

    {"v": 1, "limit": 8388608, "bytes": 1234,
     "files":   [{"path": "answer.txt", "mode": 420, "size": 6, "sha256": "…"}],
     "dirs":    [{"path": "src", "mode": 493}],
     "links":   [{"path": "latest", "target": "src/main.py"}],
     "omitted": [{"path": "big.bin", "size": 52428800, "reason": "over the workspace limit"}]}

Contents live in the blob store (``_world.store``), named by the sha256 of the scrubbed bytes.
A manifest read from a cassette is untrusted: ``Workspace.parse`` refuses absolute paths,
``..``, links that leave the tree, hashes that are not hashes, and sizes that do not add up.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Workspace", "WorkspaceError", "check_rel_path"]

_SHA = re.compile(r"[0-9a-f]{64}\Z")
_MAX_ENTRIES = 100_000


class WorkspaceError(ValueError):
    """A recorded workspace that cannot be used (damaged, hostile, or its blobs missing)."""


def check_rel_path(path: Any) -> str:
    """``path`` if it is a plain relative POSIX path that stays inside its root."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise WorkspaceError(f"bad path {path!r}")
    norm = posixpath.normpath(path)
    if path.startswith("/") or norm != path or norm == "." or norm.split("/")[0] == "..":
        raise WorkspaceError(f"path {path!r} is not a plain relative path inside the workspace")
    return path


def link_stays_inside(path: str, target: str) -> bool:
    """A relative link target that, resolved from the link's folder, stays in the tree."""
    if not target or target.startswith("/") or "\x00" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return joined != ".." and not joined.startswith("../") and not joined.startswith("/")


@dataclass
class Workspace:
    """One rollout's workspace: what was kept, and what was left out and why."""

    files: list[dict[str, Any]] = field(default_factory=list)
    dirs: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    omitted: list[dict[str, Any]] = field(default_factory=list)
    limit: int = 0
    bytes: int = 0

    def record(self) -> dict[str, Any]:
        return {"v": 1, "limit": self.limit, "bytes": self.bytes, "files": self.files,
                "dirs": self.dirs, "links": self.links, "omitted": self.omitted}

    @classmethod
    def parse(cls, data: Any) -> Workspace:
        """A manifest from a cassette, checked (``WorkspaceError`` says what is wrong)."""
        if not isinstance(data, dict) or data.get("v") != 1:
            raise WorkspaceError("not a version-1 workspace record")
        lists = {k: data.get(k) or [] for k in ("files", "dirs", "links", "omitted")}
        if not all(isinstance(v, list) for v in lists.values()):
            raise WorkspaceError("files/dirs/links/omitted must be lists")
        if sum(len(v) for v in lists.values()) > _MAX_ENTRIES:
            raise WorkspaceError(f"more than {_MAX_ENTRIES} entries")
        ws = cls(limit=_int(data.get("limit", 0)), bytes=_int(data.get("bytes", 0)))
        seen: set[str] = set()
        for entry in lists["files"]:
            path = _entry_path(entry, seen)
            sha = entry.get("sha256")
            if not isinstance(sha, str) or not _SHA.match(sha):
                raise WorkspaceError(f"{path}: sha256 {sha!r} is not a sha256 hex digest")
            ws.files.append({"path": path, "mode": _mode(entry.get("mode", 0o644)),
                             "size": _int(entry.get("size", 0)), "sha256": sha})
        for entry in lists["dirs"]:
            ws.dirs.append({"path": _entry_path(entry, seen),
                            "mode": _mode(entry.get("mode", 0o755))})
        for entry in lists["links"]:
            path = _entry_path(entry, seen)
            target = entry.get("target")
            if not isinstance(target, str) or not link_stays_inside(path, target):
                raise WorkspaceError(f"{path}: link target {target!r} leaves the workspace")
            ws.links.append({"path": path, "target": target})
        for entry in lists["omitted"]:
            if isinstance(entry, dict):
                ws.omitted.append({"path": str(entry.get("path", "")),
                                   "size": _int(entry.get("size", 0)),
                                   "reason": str(entry.get("reason", ""))})
        if sum(f["size"] for f in ws.files) != ws.bytes:
            raise WorkspaceError("file sizes do not add up to the recorded total")
        return ws


def _entry_path(entry: Any, seen: set[str]) -> str:
    if not isinstance(entry, dict):
        raise WorkspaceError(f"entry {entry!r} is not an object")
    path = check_rel_path(entry.get("path"))
    if path in seen:
        raise WorkspaceError(f"{path} is listed twice")
    seen.add(path)
    return path


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkspaceError(f"{value!r} is not a size")
    return value


def _mode(value: Any) -> int:
    # permission bits only: a cassette never makes a setuid file
    return _int(value) & 0o777
