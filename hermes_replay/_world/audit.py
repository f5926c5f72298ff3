"""``verify`` over the workspace stores beside the cassettes: a blob is scanned for secrets by
the one rule set, like every cassette line (the recorder scrubs before it stores, so a finding
means the store was edited, or written by an older or another tool)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from hermes_replay._secrets.scan import scan_string
from hermes_replay._world.store import store_for

__all__ = ["audit_stores"]

_MAX_BLOB = 64 * 1024 * 1024


def audit_stores(cassettes: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    """(blob path, what is wrong) for every blob of the stores these cassettes use."""
    seen: set[Path] = set()
    for cassette in cassettes:
        root = store_for(cassette).root
        if root in seen or not root.is_dir() or root.is_symlink():
            continue
        seen.add(root)
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in sorted(files):
                path = Path(folder) / name
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    yield path, "not a readable regular file in the workspace store"
                    continue
                with os.fdopen(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        yield path, "not a regular file in the workspace store"
                        continue
                    data = fh.read(_MAX_BLOB + 1)
                if len(data) > _MAX_BLOB:
                    yield path, f"a workspace blob over {_MAX_BLOB} bytes"
                    continue
                for message in scan_string(data.decode("latin-1"), str(path), False):
                    yield path, message
