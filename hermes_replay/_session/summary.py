"""What a cassette session reports: progress events, outcome comparisons, the summary."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hermes_replay._errors import Miss

__all__ = ["OutcomeComparison", "ReplayEvent", "ReplaySummary"]


@dataclass(frozen=True)
class ReplayEvent:
    """Passed to ``on_event`` as requests are handled (for progress output).

    ``kind``: ``"loaded"`` (replay/auto opened the cassette; ``seq`` is how many rollouts it
    holds), ``"hit"`` (served from the cassette), ``"miss"`` (once per miss), ``"record"``
    (written),
    ``"failed"`` (a failed attempt while recording: not written), ``"interrupted"`` (the
    block raised; ``url`` is the ``.partial`` file that keeps what was recorded).
    """

    kind: str
    rollout: str | None
    seq: int | None
    method: str
    url: str
    status: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class OutcomeComparison:
    """A rollout's outcome as recorded and as reported in this run (either may be None)."""

    rollout: str
    recorded: dict[str, Any] | None
    replayed: dict[str, Any] | None

    @property
    def reward_changed(self) -> bool:
        if not self.recorded or not self.replayed:
            return False
        return self.recorded.get("reward") != self.replayed.get("reward")


def rerecorded_line(rerecorded: dict[str, int], written: dict[str, Any] | None = None) -> str:
    """What ``auto`` recorded anew, in one line (for every place that reports it); with
    ``written`` (the session's count of what the new file holds) the counts add up to it."""
    if not rerecorded:
        head = "re-recorded nothing: every request was in the cassette"
    else:
        shown = ", ".join(f"{r} ({n} turn{'s' if n != 1 else ''})"
                          for r, n in list(rerecorded.items())[:8])
        more = f" and {len(rerecorded) - 8} more" if len(rerecorded) > 8 else ""
        head = (f"re-recorded {sum(rerecorded.values())} turn(s) in {len(rerecorded)} "
                f"rollout(s): {shown}{more}")
    if written is None:
        return head + ("; every other recording kept as it was" if rerecorded else "")
    line = (f"{head}; the new file holds {written['holds']} interaction(s) in "
            f"{written['rollouts']} rollout(s): {written['rerecorded']} re-recorded + "
            f"{written['kept']} kept as they were")
    if not written["dropped"]:
        return line + "; nothing dropped"
    parts = []
    gone = list(written.get("dropped_rollouts") or [])
    if gone:
        names = ", ".join(gone[:4]) + (f" and {len(gone) - 4} more" if len(gone) > 4 else "")
        n = written["dropped_in_rollouts"]  # recordings in the gone rollouts
        parts.append(f"{'all ' if n == written['dropped'] else ''}{n} in {len(gone)} "
                     f"rollout(s) the command no longer makes ({names})")
    rest = written["dropped"] - written.get("dropped_in_rollouts", 0)
    if rest:
        parts.append(f"{rest} turn(s) of re-recorded rollouts this run did not request")
    return line + f"; {written['dropped']} old recording(s) dropped: " + ", ".join(parts)


@dataclass
class ReplaySummary:
    """The result of one cassette session; ``lines()`` renders it for a terminal.

    ``interactions``: LLM requests served from the cassette or recorded; ``turns``: those
    made inside a rollout scope; ``unused``: recordings never requested, as (rollout, seq);
    ``recorded_rollouts``: how many rollouts the cassette held (replay, auto); ``never_ran``:
    those of them that made no request at all in this run; ``rerecorded`` (auto): the turns
    recorded anew, per rollout.
    """

    mode: str
    cassette: str
    rollouts: int = 0
    interactions: int = 0
    turns: int = 0
    misses: list[Miss] = field(default_factory=list)
    unused: list[tuple[str | None, int]] = field(default_factory=list)
    recorded: int = 0
    failed_attempts: int = 0
    passthrough: int = 0
    outcomes: list[OutcomeComparison] = field(default_factory=list)
    recorded_rollouts: int = 0
    never_ran: list[str] = field(default_factory=list)
    rerecorded: dict[str, int] = field(default_factory=dict)  # auto: rollout -> turns recorded
    #: auto, once written: what the new file holds — ``holds`` = ``rerecorded`` + ``kept``;
    #: ``dropped`` old recordings (``dropped_rollouts`` never ran); None until written
    written: dict[str, Any] | None = None
    other_workers: int = 0  # recordings of other workers of a deployment (not this one's)
    worker: str | None = None  # this worker's identity, if it has one
    tools_replayed: int = 0  # tool calls answered from the cassette (nothing executed)
    tools_executed: int = 0  # tool calls that really ran (record, or ``tools="execute"``)
    tools_errored: int = 0  # of those, the ones whose result reports an error
    tool_drift: list[Any] = field(default_factory=list)  # ``_tools.ToolDrift`` per call
    unused_tools: list[tuple[str | None, int]] = field(default_factory=list)
    #: rollouts whose changed reward ran in their recorded workspace: [files restored, calls]
    rescored: dict[str, list[int]] = field(default_factory=dict)
    #: auto: rollouts whose agent side differed, re-run for real from their first tool call
    rebuilt: dict[str, str] = field(default_factory=dict)

    @property
    def mean_reward(self) -> float | None:
        rewards = [o.replayed["reward"] for o in self.outcomes
                   if o.replayed and isinstance(o.replayed.get("reward"), (int, float))]
        return sum(rewards) / len(rewards) if rewards else None

    @property
    def changed_rewards(self) -> list[tuple[str, Any, Any]]:
        return [(o.rollout, o.recorded.get("reward"), o.replayed.get("reward"))
                for o in self.outcomes if o.reward_changed and o.recorded and o.replayed]

    def lines(self) -> Iterator[str]:
        if self.mode == "passthrough":
            yield f"passthrough: {self.passthrough} LLM request(s) went live, nothing written"
            return
        head = (f"{self.mode} {self.cassette}: {self.interactions} interaction(s) in "
                f"{self.rollouts} rollout(s)")
        if self.recorded:
            head += f", {self.recorded} recorded"
        if self.failed_attempts:
            head += f", {self.failed_attempts} failed attempt(s) not written"
        yield head
        if self.tools_replayed or self.tools_executed:
            yield (f"tool calls: {self.tools_replayed} answered from the cassette, "
                   f"{self.tools_executed} executed")
        yield from world_lines(self.rescored, self.rebuilt)
        if self.tool_drift:
            yield f"{len(self.tool_drift)} tool call(s) drifted from the recording:"
            for drift in self.tool_drift[:10]:
                yield from drift.describe().splitlines()
        if self.unused_tools:
            yield f"{len(self.unused_tools)} recorded tool call(s) never made"
        if self.mean_reward is not None:
            yield f"mean reward {self.mean_reward:.4g} over {len(self.outcomes)} rollout(s)"
        for rollout, old, new in self.changed_rewards:
            yield f"reward changed: {rollout}: {old} -> {new}"
        if self.misses:
            after = sum(1 for m in self.misses if getattr(m, "cause", None))
            follow = f" ({after} follow from an earlier miss)" if after else ""
            yield f"{len(self.misses)} miss(es){follow}: " + "; ".join(
                m.short_where for m in self.misses[:10])
        if self.unused:
            yield f"{len(self.unused)} recording(s) never used"
        if self.never_ran:
            yield (f"{len(self.never_ran)} of {self.recorded_rollouts} recorded rollout(s) "
                   "never ran: " + ", ".join(self.never_ran[:10]))
        if self.mode == "auto":
            yield rerecorded_line(self.rerecorded, self.written)
        if self.other_workers:
            yield (f"worker {self.worker}: {self.other_workers} recording(s) of other workers "
                   "left to them")
        if self.misses:
            yield ("next: record only what is missing with mode=\"auto\" (the old file stays "
                   "until it succeeds), or re-record")
        elif self.changed_rewards:
            yield "next: review the reward changes; re-record if they are intended"


def world_lines(rescored: dict[str, list[int]], rebuilt: dict[str, str]) -> Iterator[str]:
    """What ran because a rollout's world mattered: re-scores and rebuilds, one line each."""
    if rescored:
        calls = sum(c for _, c in rescored.values())
        yield (f"re-scored from the recorded workspace: {len(rescored)} rollout(s), {calls} "
               "reward tool call(s) run offline in a fresh sandbox (the reward's calls changed)")
        for rid, (files, count) in sorted(rescored.items())[:10]:
            yield f"  {rid}: {files} file(s) restored, {count} call(s) run"
    if rebuilt:
        yield (f"re-recorded whole: {len(rebuilt)} rollout(s) whose agent side differed (their "
               "tools ran again from the first call, the reward in that world)")
        for rid, why in sorted(rebuilt.items())[:10]:
            yield f"  {rid}: {why}"
