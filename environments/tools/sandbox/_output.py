"""Reading a command's captured output, capped in the middle so huge output never fills memory."""

from __future__ import annotations

import os
from typing import BinaryIO

__all__ = ["read_capped"]


def read_capped(fh: BinaryIO, cap: int) -> tuple[str, bool]:
    """Output text, cut in the middle to ``cap`` characters (plus a marker) if longer."""
    head_n, tail_n = cap // 2, cap - cap // 2
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= 8 * cap:  # small enough to decode whole (UTF-8 is at most 4 bytes a char)
        text = fh.read().decode("utf-8", errors="replace")
        if len(text) <= cap:
            return text, False
        head, tail, omitted = text[:head_n], text[-tail_n:], len(text) - cap
        unit = "characters"
    else:  # huge: never load it all, read 4 bytes per kept character from each end
        head = fh.read(4 * head_n).decode("utf-8", errors="replace")[:head_n]
        fh.seek(size - 4 * tail_n)
        tail = fh.read().decode("utf-8", errors="replace")[-tail_n:]
        omitted = size - len(head.encode()) - len(tail.encode())
        unit = "bytes"
    marker = f"\n[... output truncated: {omitted} {unit} omitted ...]\n"
    return head + marker + tail, True
