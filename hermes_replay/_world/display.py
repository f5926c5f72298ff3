"""A recorded workspace as lines for ``show``: the tree the reward found, with sizes, and what
was left out. Names come from a cassette (untrusted): the caller sanitises every line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_replay._world.manifest import WorkspaceError
from hermes_replay._world.rescore import load_workspace
from hermes_replay._world.store import store_for

__all__ = ["workspace_lines"]

_SHOWN = 200  # entries listed before the rest are counted


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def workspace_lines(record: Any, cassette: str | Path) -> list[str]:
    """Lines describing ``record`` (an outcome's ``"workspace"``), or [] when there is none."""
    if not isinstance(record, dict):
        return []
    try:
        ws = load_workspace(record, store_for(cassette))
    except (WorkspaceError, OSError) as exc:
        return [f"  workspace recorded, but it cannot be read: {exc}"]
    head = (f"  {len(ws.files)} file(s), {_size(ws.bytes)} (limit {_size(ws.limit)})"
            if ws.limit else f"  {len(ws.files)} file(s), {_size(ws.bytes)}")
    entries = sorted([(f["path"], _size(f["size"])) for f in ws.files]
                     + [(d["path"] + "/", "") for d in ws.dirs]
                     + [(lk["path"], f"-> {lk['target']}") for lk in ws.links])
    lines = [head] + [f"    {path}  {what}".rstrip() for path, what in entries[:_SHOWN]]
    if len(entries) > _SHOWN:
        lines.append(f"    … and {len(entries) - _SHOWN} more")
    for left in ws.omitted:
        size = f", {_size(left['size'])}" if left.get("size") else ""
        lines.append(f"    left out: {left['path']} ({left['reason']}{size})")
    return lines
