"""Message lists diffed as sequences: "1 message inserted at [0]", not every field after it.

A request's ``messages`` are rendered one line per field with the message's index in the
name (``body.messages[1].content``). Diffing those names position by position turns one
inserted system message into "every message after it changed role and content". So when the
two lists differ in length, their messages are aligned as a sequence first (difflib over the
messages' own lines): a message only one side has is inserted or deleted, shown whole with
its text; aligned messages that differ are diffed field by field under the new index. Lists
of the same length keep the positional diff (a changed message is one change, not a
deletion and an insertion).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DELETED", "INSERTED", "sequence_changes", "sequence_summary"]

INSERTED, DELETED = " (inserted)", " (deleted)"
_ITEM = re.compile(r"^((?:[\w]+\.)*messages)\[(\d+)\]")


def _list_prefix(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = _ITEM.match(line)
        if match:
            return match.group(1)
    return None


def _split(lines: Sequence[str], prefix: str) -> tuple[list[list[str]], list[str]]:
    """The list's items (each its lines, index replaced by ``[*]``) and the other lines."""
    items: dict[int, list[str]] = {}
    rest: list[str] = []
    pattern = re.compile(rf"^{re.escape(prefix)}\[(\d+)\]")
    for line in lines:
        match = pattern.match(line)
        if match:
            items.setdefault(int(match.group(1)), []).append(
                f"{prefix}[*]{line[match.end():]}")
        else:
            rest.append(line)
    return [items[i] for i in sorted(items)], rest


def _at(lines: Sequence[str], prefix: str, index: int) -> list[str]:
    star = f"{prefix}[*]"
    return [f"{prefix}[{index}]{line[len(star):]}" for line in lines]


def sequence_changes(old: Sequence[str], new: Sequence[str],
                     positional: Callable[[Sequence[str], Sequence[str]], list[Any]],
                     make: Callable[[str, tuple[str, ...]], Any]) -> list[Any] | None:
    """The changes between two rendered values with their message lists aligned, or None
    when the lists have the same length (``positional`` then does it all). ``positional``
    diffs lines field by field; ``make(field, lines)`` builds one change."""
    prefix = _list_prefix(old) or _list_prefix(new)
    if prefix is None:
        return None
    a, rest_a = _split(old, prefix)
    b, rest_b = _split(new, prefix)
    if len(a) == len(b):
        return None
    out: list[Any] = []
    matcher = difflib.SequenceMatcher(None, ["\n".join(x) for x in a],
                                      ["\n".join(x) for x in b], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        # messages that differ: aligned by role within the block (a changed user message
        # pairs with a user message), each pair diffed field by field under the new index
        by_role = difflib.SequenceMatcher(None, [_role(x) for x in a[i1:i2]],
                                          [_role(x) for x in b[j1:j2]], autojunk=False)
        for sub, k1, k2, l1, l2 in by_role.get_opcodes():
            pairs = min(k2 - k1, l2 - l1) if sub in ("equal", "replace") else 0
            for k in range(pairs):
                i, j = i1 + k1 + k, j1 + l1 + k
                out += positional(_at(a[i], prefix, j), _at(b[j], prefix, j))
            for i in range(i1 + k1 + pairs, i1 + k2):
                out.append(make(f"{prefix}[{i}]{DELETED}",
                                tuple("-" + line for line in _at(a[i], prefix, i))))
            for j in range(j1 + l1 + pairs, j1 + l2):
                out.append(make(f"{prefix}[{j}]{INSERTED}",
                                tuple("+" + line for line in _at(b[j], prefix, j))))
    return out + positional(rest_a, rest_b)


def _role(item: Sequence[str]) -> str:
    """A message's role line (``…[*].role: "user"``), or "" without one."""
    return next((line for line in item if ".role: " in line and line.count(".") <= 2), "")


def sequence_summary(fields: Sequence[str]) -> str | None:
    """``1 message inserted at [0]; 1 deleted at [3]`` for a report's head, or None."""
    inserted = [f[f.rindex("["):-len(INSERTED)] for f in fields if f.endswith(INSERTED)]
    deleted = [f[f.rindex("["):-len(DELETED)] for f in fields if f.endswith(DELETED)]
    parts = []
    if inserted:
        parts.append(f"{len(inserted)} message(s) inserted at {', '.join(inserted)}")
    if deleted:
        parts.append(f"{len(deleted)} message(s) deleted at {', '.join(deleted)}")
    return "; ".join(parts) or None
