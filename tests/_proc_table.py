"""Reading this machine's process table (Linux ``/proc``) in tests that check what a run left
running."""

from __future__ import annotations

from pathlib import Path


def command_line(pid: int, width: int = 300) -> str:
    """The command line of ``pid`` as one string (for a failure message)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:width]
    except OSError:
        return f"{pid} (gone)"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
