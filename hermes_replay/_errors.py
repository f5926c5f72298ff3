"""The exceptions a user of hermes-replay can meet.

::

    HermesReplayError            base of everything below; catch this to catch all of it
     ├── CassetteError           the cassette file is missing, unreadable, corrupt or too new
     ├── RecordingFailed         record: the env failed or recorded nothing; old cassette kept
     └── CassetteMiss            replay: requests had no matching recording (raised when the
          │                      ``cassette()`` block exits, listing every miss with a diff)
          └── UnusedRecordings   replay with ``strict=True``: recordings were never requested

Every message says what happened, where (file:line, rollout, turn) and the next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CassetteError", "CassetteMiss", "HermesReplayError", "Miss", "RecordingFailed",
           "UnusedRecordings"]


class HermesReplayError(Exception):
    """Base class of all hermes-replay errors."""


class CassetteError(HermesReplayError):
    """A cassette cannot be used: missing, not JSON Lines, a bad record, or a newer schema.

    ``path`` and ``line`` (1-based, or None) say where; ``hint`` is the next step.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.line = line
        self.reason = message
        self.hint = hint
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        text = f"{where}{message}"
        if hint:
            text += f"\n  next step: {hint}"
        super().__init__(text)


class RecordingFailed(HermesReplayError):
    """A recording run must not replace the cassette: the environment exited non-zero, or no
    LLM request was recorded. The previous cassette (if any) is left as it was; what was
    recorded is in ``<cassette>.partial``."""

    def __init__(self, reason: str, *, cassette: str | Path) -> None:
        self.reason = reason
        self.cassette = str(cassette)
        super().__init__(
            f"{reason}; the previous cassette (if any) was left as it was, completed "
            f"interactions are in {cassette}.partial")


@dataclass(frozen=True)
class Miss:
    """One replayed request that found no recording.

    ``turn`` is the request's sequence number within its rollout (0-based), or its order of
    issue among scope-less requests. ``diff`` compares it with the nearest recording
    (``nearest`` names that recording as ``(rollout, seq)``) and is empty if there is none.
    """

    cassette: str
    rollout: str | None
    turn: int
    method: str
    path: str
    reason: str
    nearest: tuple[str | None, int] | None = None
    diff: str = ""

    def describe(self) -> str:
        where = f"rollout {self.rollout!r}" if self.rollout else "outside any rollout"
        lines = [f"{self.cassette}: {where}, turn {self.turn}: {self.method} {self.path}",
                 f"  {self.reason}"]
        if self.nearest is not None:
            rollout, seq = self.nearest
            name = f"rollout {rollout!r}" if rollout else "scope-less request"
            lines.append(f"  nearest recording: {name}, turn {seq}")
        if self.diff:
            lines.extend("    " + line for line in self.diff.splitlines())
        return "\n".join(lines)


_MISS_HINT = (
    "next step: if the change is intended, re-record (`hermes-replay record …`, or mode='auto' to "
    "record only what is missing); if a field is volatile, ignore it with "
    "cassette(..., ignore_paths=[...]) or normalize it with normalizers=[(regex, repl)]."
)


class CassetteMiss(HermesReplayError):
    """Replay met requests that have no matching recording.

    During the run each miss was answered with an HTTP 404 carrying the same diagnostic (so
    SDK retries do not hide it); the ``cassette()`` block raises this when it exits.
    """

    def __init__(self, misses: list[Miss], *, cassette: str | Path | None = None) -> None:
        self.misses = list(misses)
        self.cassette = str(cassette) if cassette is not None else None
        head = f"{len(self.misses)} request(s) had no matching recording"
        if self.cassette:
            head += f" in {self.cassette}"
        body = "\n".join(m.describe() for m in self.misses)
        super().__init__(f"{head}:\n{body}\n{_MISS_HINT}")


class UnusedRecordings(CassetteMiss):
    """``strict=True`` replay finished but some recordings were never requested."""

    def __init__(self, unused: list[tuple[str | None, int]], *, cassette: str | Path) -> None:
        self.unused = list(unused)
        self.misses = []
        self.cassette = str(cassette)
        shown = ", ".join(f"{r or '<no rollout>'}#{s}" for r, s in self.unused[:20])
        more = f" and {len(self.unused) - 20} more" if len(self.unused) > 20 else ""
        HermesReplayError.__init__(
            self,
            f"{cassette}: {len(self.unused)} recording(s) were never used (strict replay): "
            f"{shown}{more}\n  next step: the code now makes fewer requests than when it was "
            "recorded — re-record the cassette, or replay with strict=False to only report this.",
        )
