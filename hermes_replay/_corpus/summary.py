"""One run, summed up: ``RunSummary`` (what ``record``/``replay``/``passthrough`` print at the
end of a run, a row of a corpus' table and of ``replay.json``), and the one place that judges
it — :func:`summarize` (a run's result or error into a summary and the message to show),
:func:`status` (ok, CHANGED, MISS, ERROR, skip) and :func:`exit_code`.

``-j`` and Ray send summaries between processes, so a summary stays a dataclass of plain
values; its lines are plain text, colored by the caller's ``Style``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette.labels import named
from hermes_replay._terminal.render import Style, fmt_reward, sanitize

__all__ = ["RunSummary", "exit_code", "failed", "status", "summarize"]


@dataclass
class RunSummary:
    """What ``record``/``replay``/``passthrough`` print at the end of one run."""

    mode: str
    cassette: str | None
    rollouts: int = 0
    turns: int = 0
    misses: int = 0
    consequences: int = 0  # of the misses: those that follow from an earlier one of the rollout
    unused: int = 0
    unused_keys: list[str] = field(default_factory=list)  # "rollout#turn" of unused recordings
    recorded: int = 0
    failed_attempts: int = 0  # record: requests that failed live and were not written
    mean_reward: float | None = None
    changed: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # rollout -> its item's name
    #: what ``changed`` compares with when not the recording: "snapshot PATH" (``baseline``)
    baseline: str | None = None
    baseline_file: str | None = None  # the snapshot file, absolute (what watch's accept writes)
    baseline_note: str | None = None  # why the recording, though snapshots exist
    accepted: int = 0  # rollouts whose reward differs from the recording, accepted in it
    exit_code: int = 0
    error: str | None = None
    #: the error was printed in full just above the summary (its message): not repeated
    error_above: bool = field(default=False, compare=False)
    log: str | None = None  # where the env's own output went, if not to the terminal
    rerecorded: dict[str, int] = field(default_factory=dict)  # auto: rollout -> turns recorded
    written: dict[str, Any] | None = None  # auto: what the new file holds (``rerecorded_line``)
    skipped: str | None = None  # why this cassette was not replayed (not a failure)
    tools_replayed: int = 0  # tool calls answered from the cassette (nothing executed)
    tools_executed: int = 0  # tool calls that really ran
    tools_errored: int = 0  # of those, the ones whose result reports an error
    tool_drift: list[str] = field(default_factory=list)  # described drifts (--tools execute)
    other_workers: int = 0  # replay of one worker: recordings of the others, left to them
    handled: list[str] = field(default_factory=list)  # plain env machine defaults, once each
    worker: str | None = None  # --executor ray: "<node id>:<pid>" of the actor that ran it
    retried: str | None = None  # --executor ray: why this replay is its second attempt
    live: str | None = None  # --llm live=…: which calls went live, and where
    rescored_cassette: str | None = None  # --llm live=…: the new cassette it wrote
    #: --rescore K: rollout -> {"recorded", "rewards" (K), "mean", "stdev", "min", "max"}
    rescore: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: rollouts whose changed reward ran in their recorded workspace: [files, calls]
    rescored_world: dict[str, list[int]] = field(default_factory=dict)
    #: auto / --missing-only: rollouts re-recorded whole, and why
    rebuilt: dict[str, str] = field(default_factory=dict)

    def _baseline_lines(self, style: Style) -> list[str]:
        """Which rewards ``changed`` is against, when not plainly the recording."""
        if self.baseline:
            accepted = (f"; {self.accepted} reward(s) differ from the recording, accepted there"
                        if self.accepted else "")
            return ["  " + style(f"rewards compared with the accepted {sanitize(self.baseline)}"
                                 f"{accepted}", "dim")]
        if self.baseline_note:
            return ["  " + style(sanitize(self.baseline_note), "yellow")]
        return []

    def lines(self, style: Style) -> list[str]:
        what = {"record": "recorded", "replay": "replayed", "passthrough": "ran live",
                "auto": "run"}.get(self.mode, self.mode)
        head = f"hermes-replay {self.mode}"
        if self.cassette:
            head += f" · {self.cassette}"
        parts = [f"{self.rollouts} rollouts {what}", f"{self.turns} turns"]
        if self.mode in ("record", "auto") and self.error:  # nothing replaced the cassette
            parts[0] = f"0 rollouts {what}" + (f" ({self.rollouts} ran)" if self.rollouts else "")
        if self.mode in ("record", "auto"):
            parts.append(f"{self.recorded} interactions written")
        if self.mode == "replay":
            follow = f" ({self.consequences} follow from another)" if self.consequences else ""
            parts.append(style(f"{self.misses} misses", "red") + follow if self.misses
                         else "0 misses")
            parts.append(
                style(f"{self.unused} unused recordings", "yellow")
                if self.unused
                else "0 unused recordings"
            )
            if self.other_workers:
                parts.append(f"{self.other_workers} left to other workers")
        parts.append(f"mean reward {fmt_reward(self.mean_reward)}")
        if self.skipped:
            return [style(head, "bold"),
                    "  " + style("skipped: ", "yellow") + sanitize(self.skipped)]
        out = [style(head, "bold"), "  " + " · ".join(parts)]
        out.extend("  handled: " + sanitize(text) for text in self.handled)
        if self.mode == "auto" and not self.error and not self.exit_code:
            from hermes_replay._session.summary import rerecorded_line

            out.append("  " + sanitize(rerecorded_line(self.rerecorded, self.written)))
        if self.unused_keys and not (self.mode == "auto" and self.written is not None):
            # (auto: what the run did not request is dropped, counted in the line above)
            shown = sanitize(", ".join(self.unused_keys[:5]))
            more = f" and {len(self.unused_keys) - 5} more" if len(self.unused_keys) > 5 else ""
            out.append(f"  unused: {shown}{more} (the run made fewer requests than recorded)")
        if self.mode == "replay" and (self.tools_replayed or self.tools_executed):
            out.append(f"  tool calls: {self.tools_replayed} answered from the cassette, "
                       f"{self.tools_executed} executed")
        from hermes_replay._session.summary import world_lines

        if self.mode in ("record", "auto") and self.tools_executed \
                and 2 * self.tools_errored > self.tools_executed:
            out.append("  " + style(f"warning: {self.tools_errored} of {self.tools_executed} "
                                    "tool calls reported an error", "yellow") +
                       " — the rewards may measure a broken sandbox or tool, not the model; "
                       "`hermes-replay show` lists each result")

        out.extend("  " + sanitize(line) for line in world_lines(self.rescored_world,
                                                                  self.rebuilt))
        if self.tool_drift:
            out.append("  " + style(f"{len(self.tool_drift)} tool result(s) drifted from the "
                                    "recording", "yellow") + " (fatal only with --strict):")
            for text in self.tool_drift[:5]:
                out.extend("  " + sanitize(line) for line in text.splitlines()[:14])
            if len(self.tool_drift) > 5:
                out.append(f"    … and {len(self.tool_drift) - 5} more")
        out.extend(self._live_lines(style))
        out.extend(self._baseline_lines(style))
        for rid, (old, new) in sorted(self.changed.items()):
            out.append(
                "  " + style("reward changed", "yellow")
                + f" {sanitize(named(rid, self.labels.get(rid)))}: {fmt_reward(old)} -> "
                f"{fmt_reward(new)}"
            )
        if self.mode == "record" and self.failed_attempts and not self.error:
            out.append("  " + style("warning: ", "yellow") + f"{self.failed_attempts} requests "
                       "failed live and were not written; the env may have scored those "
                       "rollouts as failures — check the endpoint and re-record if so")
        if self.retried:
            out.append("  " + style("retried: ", "yellow") + sanitize(self.retried)
                       + "; this is the second attempt, on another worker")
        if self.error:  # (a refusal printed in full above was shown twice)
            out.append("  " + style("error: ", "red") + ("shown above" if self.error_above
                                                         else sanitize(self.error)))
        if self.exit_code:
            out.append(f"  environment exit code {self.exit_code}")
        if self.log and (self.error or self.exit_code) and Path(self.log).is_file():
            out.append(f"  environment output: {self.log}")  # (none when the env never ran)
        return out

    def _live_lines(self, style: Style) -> list[str]:
        """What a re-scoring run adds: where the live calls went, the new cassette, and per
        rollout the recorded reward beside the K new ones (mean ± stdev, min–max)."""
        out: list[str] = []
        if self.live:
            out.append("  live: " + sanitize(self.live))
        if self.rescored_cassette:
            out.append("  rescored cassette: " + sanitize(self.rescored_cassette))
        if self.rescore:
            runs = max(len(s.get("rewards") or []) for s in self.rescore.values())
            out.append(f"  re-scored {runs} time(s): rollout, recorded -> mean ± stdev "
                       "[min–max]")
            for rid, s in self.rescore.items():
                spread = (f"{fmt_reward(s.get('mean'))} ± {fmt_reward(s.get('stdev'))} "
                          f"[{fmt_reward(s.get('min'))}–{fmt_reward(s.get('max'))}]")
                out.append(f"    {sanitize(rid)}: {fmt_reward(s.get('recorded'))} -> {spread}")
        return out


def failed(summary: RunSummary) -> bool:
    """The run failed: an error, a non-zero exit, or a miss (a changed reward is not)."""
    return bool(summary.error or summary.exit_code or summary.misses)


def status(summary: RunSummary) -> str:
    """The row's verdict: ``skip``, ``MISS``, ``ERROR``, ``CHANGED`` or ``ok``."""
    if summary.skipped:
        return "skip"
    if summary.misses:
        return "MISS"
    if summary.error or summary.exit_code:
        return "ERROR"
    return "CHANGED" if summary.changed else "ok"


def exit_code(summaries: Iterable[RunSummary], fail_on_change: bool) -> int:
    """1 when any run failed (or, with ``fail_on_change``, a reward moved), else 0."""
    rows = list(summaries)
    if any(failed(s) for s in rows):
        return 1
    return 1 if fail_on_change and any(s.changed for s in rows) else 0


def summarize(mode: str, cassette: Path | None, result: Any, error: BaseException | None, *,
              log: Path | None = None, verbose: bool = False,
              normalizers: list[Any] | None = None) -> tuple[RunSummary, str]:
    """A finished run as its summary and the message to show above it (empty when there is
    nothing to say). ``result`` is the run's ``RunResult``; ``error`` what stopped it before
    there was one (a bad cassette, Ctrl-C). A miss is shown with its diffs (the first few,
    shortened, unless ``verbose``) and a next step made of commands (which repeats
    ``normalizers``, the ones given as flags, in its ``record --missing-only``); a failed
    live run ends with the last lines of its ``log``."""
    from hermes_replay._errors import (
        CassetteMiss,
        HermesReplayError,
        RecordingFailed,
        UnusedRecordings,
    )

    summary = RunSummary(mode=mode, cassette=str(cassette) if cassette else None,
                         log=str(log) if log else None)
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP (see _signals)
        from hermes_replay._runner.signals import describe
        from hermes_replay._runner.signals import exit_code as signal_exit_code

        kept = (f"; the previous cassette was kept, completed interactions are in "
                f"{cassette}.partial" if mode == "record" else "")
        summary.error, summary.exit_code = describe(error), signal_exit_code(error)
        return summary, (f"\nhermes-replay {mode}: {describe(error)}; nothing was "
                         f"overwritten{kept}.")
    if error is not None or result is None:  # before the run started (a bad cassette)
        summary.error = str(error).splitlines()[0] if str(error) else type(error).__name__
        summary.error_above = True
        return summary, f"hermes-replay {mode}: {sanitize(str(error))}"
    fill(summary, result)
    error = result.error
    message = ""
    if isinstance(error, RecordingFailed):
        summary.error = str(error)
    elif isinstance(error, UnusedRecordings):
        message = f"hermes-replay {mode}: {sanitize(str(error))}"
        summary.error = f"{len(error.unused)} recordings never used (strict)"
    elif isinstance(error, CassetteMiss):
        from hermes_replay._corpus.misses import cli_miss_hint, miss_report

        hint = cli_miss_hint(cassette, error.misses, normalizers)
        message = f"hermes-replay {mode}: {miss_report(error, verbose=verbose, hint=hint)}"
        summary.error = f"{len(error.misses)} requests had no recording"
    elif isinstance(error, HermesReplayError) or error is not None:
        message = f"hermes-replay {mode}: {sanitize(str(error))}"
        summary.error = str(error).splitlines()[0]
        summary.error_above = True
    if mode != "replay" and (summary.error or summary.exit_code):
        tail = _log_tail(log)  # (a failed replay's error carries the tail already)
        message = "\n".join(part for part in (message, tail) if part)
    return summary, message


def _log_tail(log_path: Path | None) -> str:
    """The end of the env log: what the environment said last (a crash's traceback)."""
    from hermes_replay._runner.verdict import log_tail

    tail = log_tail(log_path)
    if not tail:
        return ""
    return "\n".join([f"last lines of the environment output ({log_path}):",
                      *(f"  | {sanitize(line)}" for line in tail)])


def fill(summary: RunSummary, result: Any) -> None:
    """The numbers a summary shows, from the run's result and its session's own counts."""
    rewards = [r.reward for r in result.rollouts if r.reward is not None]
    summary.exit_code = result.exit_code
    summary.rollouts = len(result.rollouts)
    summary.turns = sum(r.turns or 0 for r in result.rollouts)
    summary.mean_reward = sum(rewards) / len(rewards) if rewards else None
    summary.changed = result.changed_rewards()
    if summary.mode == "replay" and result.cassette is not None:
        _against_baseline(summary, result)
    summary.labels = {r.id: r.label for r in result.rollouts if r.label}
    summary.handled = list(result.handled)
    core = result.summary
    if core is None:
        return
    summary.rollouts = max(summary.rollouts, core.rollouts)
    summary.turns = core.turns or summary.turns
    summary.misses = len(core.misses)
    summary.consequences = sum(1 for m in core.misses if m.cause is not None)
    summary.unused = len(core.unused)
    summary.other_workers = core.other_workers
    summary.unused_keys = list(result.unused)
    summary.recorded = core.recorded
    summary.failed_attempts = core.failed_attempts
    summary.rerecorded = dict(core.rerecorded)
    summary.written = dict(core.written) if core.written is not None else None
    summary.tools_replayed = core.tools_replayed
    summary.tools_executed = core.tools_executed
    summary.tools_errored = core.tools_errored
    summary.tool_drift = [d.describe() for d in core.tool_drift]
    summary.rescored_world = {r: list(v) for r, v in core.rescored.items()}
    summary.rebuilt = dict(core.rebuilt)


def _against_baseline(summary: RunSummary, result: Any) -> None:
    """``changed`` against the accepted baseline: the project's reward snapshot of this
    cassette where one exists, else the recording (``_corpus/baseline.py``)."""
    from hermes_replay._corpus.baseline import changes, find_baseline
    from hermes_replay._runner.plan import project_root

    cassette = Path(result.cassette).resolve()
    root = project_root(cassette.parent)  # else the working folder, when it holds the cassette
    if root is None and cassette.is_relative_to(Path.cwd().resolve()):
        root = Path.cwd().resolve()
    found = find_baseline(root, result.env_name, result.recorded_rewards)
    summary.baseline_note = found.note
    if not found.is_snapshot:
        return
    summary.baseline = found.source
    summary.baseline_file = str(found.path)
    summary.changed = changes(found, result.rewards)
    summary.accepted = len(set(result.changed_rewards()) - set(summary.changed))
