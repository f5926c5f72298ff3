"""Workspaces stored as trees of folder listings, so rollouts over one checkout share them.

A flat manifest repeats every file's entry in every rollout: over a repository checkout of
2,000 files, a hundred rollouts would carry 200,000 entries though the files are stored once.
So, as git does, each folder's listing is itself a blob in the store — its files ``[name,
mode, size, sha256]``, links ``[name, target]`` and sub-folders ``[name, mode, listing
sha256]`` — and the cassette keeps only the root listing's hash (``{"v": 2, "tree": …}``). A
folder no rollout changed has the same listing, hence the same blob, in every rollout.

Reading a tree back is reading untrusted data: every listing is checked against its hash by
the store, every name is a plain name (no ``/``, ``.``/``..``, NUL), and the expansion is
bounded (``MAX_ENTRIES``) — shared sub-trees could otherwise describe exponentially many files.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_replay._world.manifest import Workspace, WorkspaceError
from hermes_replay._world.store import BlobStore

__all__ = ["MAX_ENTRIES", "expand", "store_tree"]

MAX_ENTRIES = 100_000
_LISTING_LIMIT = 16 * 1024 * 1024


def store_tree(ws: Workspace, store: BlobStore) -> dict[str, Any]:
    """Put ``ws``'s folder listings in ``store``; the v2 record the cassette keeps."""
    folders: dict[str, dict[str, list[Any]]] = {"": {"files": [], "links": [], "dirs": []}}
    modes = {d["path"]: d["mode"] for d in ws.dirs}
    for path in sorted(modes, key=lambda p: p.count("/")):
        folders.setdefault(path, {"files": [], "links": [], "dirs": []})
    for entry in ws.files:
        parent, _, name = entry["path"].rpartition("/")
        folders.setdefault(parent, {"files": [], "links": [], "dirs": []})["files"].append(
            [name, entry["mode"], entry["size"], entry["sha256"]])
    for entry in ws.links:
        parent, _, name = entry["path"].rpartition("/")
        folders.setdefault(parent, {"files": [], "links": [], "dirs": []})["links"].append(
            [name, entry["target"]])
    shas: dict[str, str] = {}
    for path in sorted(folders, key=lambda p: (-p.count("/") if p else 1, p)):
        if path == "":
            continue
        shas[path] = _put(store, folders[path])
        parent, _, name = path.rpartition("/")
        folders.setdefault(parent, {"files": [], "links": [], "dirs": []})["dirs"].append(
            [name, modes.get(path, 0o755), shas[path]])
    root = _put(store, folders[""])
    return {"v": 2, "tree": root, "limit": ws.limit, "bytes": ws.bytes,
            "files": len(ws.files), "omitted": ws.omitted}


def _put(store: BlobStore, listing: dict[str, list[Any]]) -> str:
    for key in listing:
        listing[key].sort()
    return store.put(json.dumps(listing, sort_keys=True, separators=(",", ":")).encode())


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value or value in (".", "..") or "/" in value \
            or "\x00" in value:
        raise WorkspaceError(f"bad name {value!r} in a stored folder listing")
    return value


def expand(record: dict[str, Any], store: BlobStore) -> dict[str, Any]:
    """The flat (v1-shaped) manifest a v2 record describes, read from ``store``."""
    out: dict[str, Any] = {"v": 1, "limit": record.get("limit", 0),
                           "bytes": record.get("bytes", 0), "files": [], "dirs": [],
                           "links": [], "omitted": record.get("omitted") or []}
    count = 0
    stack: list[tuple[str, Any]] = [("", record.get("tree"))]
    while stack:
        prefix, sha = stack.pop()
        if not isinstance(sha, str):
            raise WorkspaceError("a folder listing reference is not a hash")
        try:
            listing = json.loads(store.get(sha, _LISTING_LIMIT))
            files, links, dirs = listing["files"], listing["links"], listing["dirs"]
            count += len(files) + len(links) + len(dirs)
            if count > MAX_ENTRIES:
                raise WorkspaceError(f"the stored tree holds more than {MAX_ENTRIES} entries")
            for name, mode, size, blob in files:
                out["files"].append({"path": prefix + _name(name), "mode": mode, "size": size,
                                     "sha256": blob})
            for name, target in links:
                out["links"].append({"path": prefix + _name(name), "target": target})
            for name, mode, child in dirs:
                path = prefix + _name(name)
                out["dirs"].append({"path": path, "mode": mode})
                stack.append((path + "/", child))
        except WorkspaceError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkspaceError(f"a stored folder listing is damaged ({exc})") from None
    return out
