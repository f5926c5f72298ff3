"""The exceptions a user of hermes-replay can meet.

::

    HermesReplayError            base of everything below; catch this to catch all of it
     ├── CassetteError           the cassette file is missing, unreadable, corrupt or too new
     ├── RecordingFailed         record: the env failed or recorded nothing; old cassette kept
     ├── UnknownFlags            a run's env flags name no option (a typo atroposlib would
     │                           ignore): raised before the environment parses anything
     ├── ReplayFailed            replay: the env exited non-zero or raised, or recorded rollouts
     │                           never ran — a replay that did not really run never passes
     ├── LiveCallsFailed         replay with live calls (``--llm live=…``): the pattern selected
     │                           no call, or a live call got no answer — nothing was re-scored
     ├── ForkError               fork: the rollout cannot be forked at that turn (one request,
     │                           a turn beyond it, drift under strict, a prefix that no longer
     │                           replays) — nothing was written
     └── CassetteMiss            replay: requests had no matching recording (raised when the
          │                      ``cassette()`` block exits, listing every miss with a diff)
          └── UnusedRecordings   replay with ``strict=True``: recordings were never requested

    RequestNotRecorded           (a BaseException) raised *inside* the code under test at the
                                 request that missed; the block then raises CassetteMiss

Every message says what happened, where (file:line, rollout, turn) and the next step. Turns
are numbered from 1, as the agent loop counts model calls (``turn N`` is a rollout's N-th
request; the cassette's 0-based ``seq`` is N - 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CassetteError", "CassetteMiss", "ForkError", "HermesReplayError", "LiveCallsFailed",
           "Miss",
           "RecordingFailed", "ReplayFailed", "RequestNotRecorded", "UnknownFlags",
           "UnusedRecordings", "miss_text"]


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


class UnknownFlags(HermesReplayError):
    """Flags of a run that are no option of the env's mode, each with its close matches.

    atroposlib takes an abbreviation (``--env.total_step``) for the flag it starts and then
    ignores it; hermes-replay refuses the run before the environment parses anything.
    """

    exit_code = 2  # a usage error, as argparse's own

    def __init__(self, env: str, mode: str, problems: list[tuple[str, list[str]]]) -> None:
        self.flags = [flag for flag, _ in problems]
        self.problems = problems
        parts = []
        for flag, near in problems:
            guess = (f"; did you mean {' or '.join(near)}?" if near
                     else "; no flag of that mode is close to it")
            parts.append(f"  {flag}{guess}")
        super().__init__(
            f"{env} {mode}: {len(problems)} unknown flag(s), refused before anything ran "
            "(atroposlib would take an abbreviation for the flag it starts, then ignore it "
            "and run with the default):\n" + "\n".join(parts)
            + f"\n  next step: spell each flag in full; `python ENV_FILE {mode} --help` "
            "lists them all")


class RecordingFailed(HermesReplayError):
    """A recording run must not replace the cassette: the environment exited non-zero, or no
    LLM request was recorded. The previous cassette (if any) is left as it was; what was
    recorded is in ``<cassette>.partial``."""

    def __init__(self, reason: str, *, cassette: str | Path, partial: bool = True) -> None:
        self.reason = reason
        self.cassette = str(cassette)
        self.partial = partial
        kept = (f"completed interactions are in {cassette}.partial" if partial else
                "nothing was recorded, so no partial recording was kept")
        super().__init__(f"{reason}; the previous cassette (if any) was left as it was, {kept}")

    def without_partial(self) -> RecordingFailed:
        """The same failure, saying that no ``.partial`` was kept (it held no recording)."""
        return RecordingFailed(self.reason, cassette=self.cassette, partial=False)


class LiveCallsFailed(HermesReplayError):
    """A replay that sends calls live (re-scoring with a live judge) did not re-score: its
    patterns selected no call, or live calls got no answer (the env then scored those rollouts
    without its judge). No rescored cassette is written; the replayed one is never touched."""

    def __init__(self, reason: str, *, cassette: str | Path, hint: str) -> None:
        self.reason, self.cassette, self.hint = reason, str(cassette), hint
        super().__init__(f"{cassette}: {reason}\n  next step: {hint}")


class ForkError(HermesReplayError):
    """A recorded rollout cannot be forked (``fork_rollout``, ``hermes-replay fork``): the
    message names the cassette, the rollout and the turn, the reason, and the next step."""

    def __init__(self, reason: str, *, cassette: str | Path, rollout: str | None = None,
                 turn: int | None = None, hint: str) -> None:
        self.reason, self.cassette, self.hint = reason, str(cassette), hint
        self.rollout, self.turn = rollout, turn
        where = "".join([f" rollout {rollout}" if rollout else "",
                         f" turn {turn}" if turn is not None else ""])
        super().__init__(f"{cassette}:{where}: cannot fork: {reason}\n  next step: {hint}")


@dataclass(frozen=True)
class Miss:
    """One replayed request that found no recording.

    ``seq`` is the request's 0-based sequence number within its rollout (its order of issue
    among scope-less requests); messages show it as ``turn`` (seq + 1). ``diff`` compares it
    with the nearest recording (``nearest`` names that recording as ``(rollout, seq)``): every
    diverging field, each with its own lines, and is empty if there is none; ``short`` is the
    same with the first three fields in full and the rest counted (what a report shows unless
    asked for all).

    ``reward_call`` (1-based) is set for a request made while the rollout's reward was being
    computed (an LLM judge): it is the K-th reward call of its rollout, as ``show`` numbers
    it, and it was compared with recorded reward calls only. ``cause`` is the headline of the
    earlier miss of the same rollout this one follows from (its agent turn missed, so what the
    reward saw changed): a consequence, not another root cause. ``normalizer`` names the
    built-in normalizer(s) with which the request would have matched (``"datetime"``).
    """

    cassette: str
    rollout: str | None
    seq: int
    method: str
    path: str
    reason: str
    nearest: tuple[str | None, int] | None = None
    diff: str = ""
    short: str = ""
    reward_call: int | None = None
    nearest_reward_call: int | None = None
    cause: str | None = None
    normalizer: str | None = None

    @property
    def turn(self) -> int:
        """The 1-based turn, as every message, log line, ``ls``, ``show`` and ``diff`` count."""
        return self.seq + 1

    @property
    def where(self) -> str:
        """``rollout 'r', turn 2`` or ``reward call 1 of rollout 'r'``."""
        if self.reward_call is not None:
            return f"reward call {self.reward_call} of rollout {self.rollout!r}"
        where = f"rollout {self.rollout!r}" if self.rollout else "outside any rollout"
        return f"{where}, turn {self.turn}"

    @property
    def short_where(self) -> str:
        """``r turn 2`` / ``r reward call 1``: for lists of misses."""
        if self.reward_call is not None:
            return f"{self.rollout} reward call {self.reward_call}"
        return f"{self.rollout or '<no rollout>'} turn {self.turn}"

    def headline(self) -> str:
        return f"{self.where}: {self.method} {self.path}"

    def describe(self, max_diff_lines: int | None = None, *, verbose: bool = True) -> str:
        """The miss with its reason and diff: every field (``verbose``), or the first three
        in full and the rest counted; ``max_diff_lines`` also caps the lines shown."""
        lines = [f"{self.cassette}: {self.headline()}", f"  {self.reason}"]
        if self.cause is not None:
            lines.append(f"  follows from the miss at {self.cause}")
        if self.nearest is not None:
            rollout, seq = self.nearest
            if self.nearest_reward_call is not None:
                name = f"reward call {self.nearest_reward_call} of rollout {rollout!r}"
                lines.append(f"  nearest recording: {name} (request {seq + 1})")
            else:
                name = f"rollout {rollout!r}" if rollout else "scope-less request"
                lines.append(f"  nearest recording: {name}, turn {seq + 1}")
        if self.normalizer:
            lines.append(f"  it matches the recording once {self.normalizer} values are "
                         "normalized (see the next step)")
        diff = (self.diff if verbose or not self.short else self.short).splitlines()
        if max_diff_lines is not None and len(diff) > max_diff_lines:
            diff = [*diff[:max_diff_lines], f"… {len(diff) - max_diff_lines} more diff line(s)"]
        lines.extend("    " + line for line in diff)
        return "\n".join(lines)


# The next step in Python; the CLI and the pytest plugin say the same with their own means
# (``record --missing-only``, ``--replay-mode auto``), see ``miss_hint``.
_MISS_HINT = (
    "next step: if the change is intended, record only what is missing with "
    "cassette(..., mode=\"auto\") (it keeps the old file until it succeeds); if a field is "
    "volatile, ignore it with cassette(..., ignore_paths=[\"body.metadata\"]) or normalize it "
    "with normalizers=[\"datetime\"] (built-ins: datetime, uuid, tmp-path, epoch, hex-id) or "
    "[(regex, replacement)] — or keep it with the cassette: `hermes-replay normalize CASSETTE "
    "--add datetime`."
)


class CassetteMiss(HermesReplayError):
    """Replay met requests that have no matching recording.

    During the run each miss ended its request at once with ``RequestNotRecorded`` (no retry
    layer sees it); the ``cassette()`` block raises this when it exits. ``hint`` is the next
    step, phrased for where the user is (Python by default).
    """

    def __init__(self, misses: list[Miss], *, cassette: str | Path | None = None,
                 hint: str = _MISS_HINT) -> None:
        self.misses = list(misses)
        self.cassette = str(cassette) if cassette is not None else None
        self.hint = hint
        super().__init__(miss_text(self.misses, self.cassette, hint))

    def with_hint(self, hint: str) -> CassetteMiss:
        """The same misses with the next step phrased for another place (CLI, pytest)."""
        if type(self) is not CassetteMiss:
            return self
        return CassetteMiss(self.misses, cassette=self.cassette, hint=hint)


def miss_text(misses: list[Miss], cassette: str | None, hint: str, *, verbose: bool = False,
              shown: int | None = None, more: str = "") -> str:
    """Misses as one report: the root causes with their diffs (the first three fields of each
    unless ``verbose``; at most ``shown`` misses), then the misses that follow from them,
    one line each, then the next step."""
    roots = [m for m in misses if m.cause is None]
    after = [m for m in misses if m.cause is not None]
    tools = sum(1 for m in misses if m.method == "TOOL")
    head = (f"{len(misses)} request(s) had no matching recording" if not tools else
            f"{len(misses) - tools} request(s) and {tools} tool call(s) had no matching "
            "recording" if tools < len(misses) else
            f"{tools} tool call(s) could not be answered from the recording")
    if after:
        head += f" ({len(roots)} cause(s); {len(after)} follow from an earlier miss)"
    if cassette:
        head += f" in {cassette}"
    listed = roots if shown is None else roots[:shown]
    lines = [head + ":"] + [m.describe(verbose=verbose) for m in listed]
    rest = roots[len(listed):]
    if rest:
        where = ", ".join(m.short_where for m in rest[:8]) + (" …" if len(rest) > 8 else "")
        lines.append(f"… and {len(rest)} more miss(es) ({where}){more}")
    if after:
        lines.append(f"{len(after)} miss(es) follow from those (a consequence, not a cause: "
                     "what the rollout sent after its miss changed with it):")
        if verbose:
            lines += [m.describe(verbose=True) for m in after]
        else:
            lines += [f"  {m.headline()} — after {m.cause}" for m in after[:20]]
            if len(after) > 20:
                lines.append(f"  … and {len(after) - 20} more")
    lines.append(hint)
    return "\n".join(lines)


class ReplayFailed(HermesReplayError):
    """A replay that did not really run: the environment exited non-zero or raised, or some
    recorded rollouts never ran. Its rewards prove nothing, so it is never a pass.

    ``what`` says what happened, ``exit_code`` is the env's, ``never_ran`` the recorded rollout
    ids that made no request, ``log_tail`` the last lines of ``log`` (the env's output).
    """

    def __init__(self, cassette: str | Path, what: str, *, exit_code: int,
                 never_ran: list[str], recorded: int, log: Path | None,
                 log_tail: list[str], hint: str) -> None:
        self.cassette = str(cassette)
        self.what, self.exit_code, self.never_ran = what, exit_code, list(never_ran)
        self.log, self.log_tail, self.hint = log, list(log_tail), hint
        lines = [f"{cassette}: the replay did not really run: {what}"]
        if never_ran:
            shown = ", ".join(never_ran[:6]) + (f" and {len(never_ran) - 6} more"
                                                if len(never_ran) > 6 else "")
            lines.append(f"  {len(never_ran)} of {recorded} recorded rollout(s) never ran: "
                         f"{shown}")
        if log_tail:
            lines.append(f"  last lines of {log}:")
            lines.extend(f"    | {line}" for line in log_tail)
        elif log is None:
            lines.append("  (the environment's output went to the terminal, above)")
        lines.append(f"  next step: {hint}")
        super().__init__("\n".join(lines))


class RequestNotRecorded(BaseException):
    """Raised inside the code under test, at the replayed request that has no recording.

    A ``BaseException`` on purpose, like ``asyncio.CancelledError`` and pytest's outcomes:
    retry layers catch ``Exception`` (atroposlib's tenacity retries every request 3 x 3 times
    with backoff, about 16 s per miss), and a miss is a verdict on the test, not an endpoint
    error to retry or to score as a failed rollout. Agent loops may catch it to end just the
    affected rollout (``HermesAgentLoop`` does); the ``cassette()`` block raises
    ``CassetteMiss`` with every miss and its diff when it exits.
    """

    def __init__(self, miss: Miss) -> None:
        self.miss = miss
        super().__init__(f"{miss.cassette}: {miss.headline()} has no recording ({miss.reason}); "
                         "the cassette block raises CassetteMiss with the diff when it exits")


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
