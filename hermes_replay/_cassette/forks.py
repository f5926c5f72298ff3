"""A branch's link to its parent (``hermes-replay fork``): read from a header, drawn as a line.

The link is the header's ``fork`` field — ``{"parent", "rollout", "turn",
"parent_fingerprint"}`` and, where they apply, ``"replaced"`` and ``"sample"`` — kept in
``extra`` like every field the format does not name, so ``compact``, ``merge``, ``verify`` and
every reader carry it unchanged. It is data from the file: shown, never followed or run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_replay._cassette.model import CassetteHeader

__all__ = ["fork_line", "fork_of", "parent_path"]


def fork_of(header: CassetteHeader) -> dict[str, Any] | None:
    """The header's parent link, or None (not a branch, or a link of the wrong shape)."""
    link = header.extra.get("fork")
    if not isinstance(link, dict) or not isinstance(link.get("rollout"), str) \
            or not isinstance(link.get("turn"), int) or isinstance(link.get("turn"), bool):
        return None
    return link


def parent_path(branch: Path, link: dict[str, Any]) -> Path | None:
    """Where the parent lies, relative to the branch's folder as the link says (None if the
    link names none)."""
    parent = link.get("parent")
    return branch.parent / parent if isinstance(parent, str) and parent else None


def fork_line(header: CassetteHeader) -> str | None:
    """``forked from PARENT at turn K of rollout R (parent fingerprint F)``, or None."""
    link = fork_of(header)
    if link is None:
        return None
    extra = ""
    replaced = link.get("replaced")
    if isinstance(replaced, dict):
        extra += f"; the tool result the model saw at turn {link['turn']} was replaced"
    if isinstance(link.get("sample"), str):
        extra += f"; sample {link['sample']}"
    return (f"forked from {link.get('parent', '?')} at turn {link['turn']} of rollout "
            f"{link['rollout']} (parent fingerprint {link.get('parent_fingerprint', '?')}; "
            f"turns 1..{link['turn'] - 1} are the parent's{extra})")
