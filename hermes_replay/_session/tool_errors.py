"""The errors and findings of tool calls under a cassette (``_session.tools`` raises them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hermes_replay._errors import HermesReplayError, RequestNotRecorded

__all__ = ["ToolCallMiss", "ToolCallsDrifted", "ToolDrift"]


class ToolCallMiss(RequestNotRecorded):
    """Raised *inside the run* by a replayed tool call that has no recording; nothing was
    executed. A ``RequestNotRecorded`` (a ``BaseException``), like an LLM miss: no retry layer
    or reward's ``except Exception`` turns it into a score; ``HermesAgentLoop`` ends just that
    rollout, and the ``cassette()`` block raises ``CassetteMiss`` with its diff."""


class ToolCallsDrifted(HermesReplayError):
    """Strict replay with ``tools="execute"``: tool results differ from the recorded ones,
    or recorded tool calls were never made."""

    def __init__(self, drift: list[ToolDrift], unused: list[tuple[str | None, int]],
                 cassette: str | Path) -> None:
        self.drift, self.unused = list(drift), list(unused)
        lines = [f"{cassette}: tool calls do not reproduce the recording (strict replay):"]
        lines += [d.describe() for d in self.drift]
        if self.unused:
            shown = ", ".join(f"{r or '<no rollout>'} tool call {s}" for r, s in self.unused[:20])
            lines.append(f"{len(self.unused)} recorded tool call(s) never made: {shown}")
        lines.append("  next step: re-record the cassette if the change is intended, or replay "
                     "without strict to only report it")
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class ToolDrift:
    """``execute`` replay: a tool call whose result now differs from its recording."""

    rollout: str | None
    seq: int
    name: str
    reason: str
    diff: str = ""

    def describe(self) -> str:
        where = f"rollout {self.rollout!r}" if self.rollout else "outside any rollout"
        lines = [f"  {where}, tool call {self.seq} ({self.name}): {self.reason}"]
        lines.extend("    " + line for line in self.diff.splitlines())
        return "\n".join(lines)


