"""Did a replay really run? The check every runner applies before a replay may pass.

A replay is a claim: "today's code, fed the recorded inputs, gives these results". It is
void when the environment exited non-zero or raised (the rewards are whatever was scored
before it died), or when recorded rollouts never ran (an env that ran nothing scores
nothing, and ``all(...)`` over no rewards is true), or when nothing ran at all (a cassette
of only its header replayed by a command that runs no step). ``replay_verdict`` turns either into a
``ReplayFailed`` naming the cassette, what happened, the last lines of the env log, the
rollouts that never ran and the next step.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from hermes_replay._errors import LiveCallsFailed, ReplayFailed
from hermes_replay._secrets.redact import redact_text
from hermes_replay._session.live_calls import LiveCalls
from hermes_replay._session.summary import ReplaySummary
from hermes_replay._terminal.render import shown_path

__all__ = ["live_verdict", "log_tail", "ran_nothing_at_all", "replay_verdict"]

TAIL_LINES = 12


def log_tail(log: Path | None, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty lines of the env log (none if it is missing or unreadable)."""
    if log is None or not log.is_file():
        return []
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 64_000))  # a long log: only its end matters here
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    # an error message of one long line (an env's startup check) must still show its advice
    kept = [line.rstrip()[:1000] for line in text.splitlines() if line.strip()]
    # a replay's log echoes cassette content (its argv, replies): printed scrubbed, as every
    # display of a cassette is (``_cassette.display``)
    return [redact_text(line) for line in kept[-lines:]]


def replay_verdict(cassette: Path, summary: ReplaySummary, exit_code: int,
                   env_file: Path, argv: Sequence[str], log: Path | None, *,
                   as_recorded: bool) -> ReplayFailed | None:
    """``ReplayFailed`` if the run did not really replay ``cassette``; else None.

    Always a failure: a non-zero exit, no recorded rollout run at all, or nothing run at all (a
    cassette that holds no rollout, replayed with no request made). Some recorded
    rollouts not run fails when the command is the recorded one (``as_recorded``); a command
    the user chose (fewer steps, ``serve`` fed by a trainer) may run a subset on purpose —
    that is reported as unused recordings, and ``strict`` makes it fail.
    """
    never_ran = list(summary.never_ran)
    all_skipped = bool(never_ran) and len(never_ran) == summary.recorded_rollouts
    ran_nothing = ran_nothing_at_all(summary)
    if exit_code == 0 and not ran_nothing and not (never_ran and (as_recorded or all_skipped)):
        return None
    rerun = shlex.join(["hermes-replay", "replay", shown_path(cassette), "-v"])
    if exit_code != 0:
        what = (f"the environment exited with code {exit_code} (a crash or an exception is "
                "code 1; its traceback is in the log)")
        hint = (f"read the traceback{' above' if log else ''}, fix the environment and replay "
                f"again; to watch its output as it runs: {rerun}")
    elif ran_nothing:
        held = len(summary.unused)
        what = (f"the cassette holds {held} recording(s) outside any rollout and the run made "
                "none of them" if held else
                "the cassette holds no recording and the run made no request")
        hint = ("a replay that runs nothing proves nothing: record the cassette again with a "
                f"command that runs at least one step (hermes-replay record {shown_path(env_file)} "
                f"… -- {shlex.join(argv[:1])} …; its recorded command is "
                f"{shlex.join(argv)[:200]!r}), or delete it; `hermes-replay verify` flags such "
                "a cassette")
    else:
        ran = summary.recorded_rollouts - len(never_ran)
        what = (f"the environment exited normally but ran {ran} of the "
                f"{summary.recorded_rollouts} recorded rollouts")
        hint = ("if the command line, dataset or item order changed on purpose, re-record the "
                f"cassette (hermes-replay record {shown_path(env_file)} … -- "
                f"{shlex.join(argv[:1])} …); "
                f"else find why those rollouts were skipped: {rerun}")
    return ReplayFailed(shown_path(cassette), what, exit_code=exit_code, never_ran=never_ran,
                        recorded=summary.recorded_rollouts, log=log, log_tail=log_tail(log),
                        hint=hint)


def ran_nothing_at_all(summary: ReplaySummary) -> bool:
    """A replay with no recorded rollout to run (the cassette holds none) that served no
    request either: nothing of the claim was tested. ``never_ran`` covers a cassette that
    holds rollouts; this covers the one that holds none (only its header, or requests
    outside rollouts that this run never made)."""
    return summary.recorded_rollouts == 0 and summary.interactions == 0


def live_verdict(cassette: Path, live: LiveCalls) -> LiveCallsFailed | None:
    """``LiveCallsFailed`` if a replay that sent calls live did not re-score ``cassette``: its
    patterns selected no call (a typo in a model name re-scores nothing, silently, otherwise),
    or live calls got no answer (the env scored those rollouts without its judge: an
    ``except`` around the judge, as research_judge_env has, hides that from the rewards)."""
    where = shown_path(cassette)
    if live.sent == 0:
        return LiveCallsFailed(
            live.nothing_selected(), cassette=where,
            hint="pick the judge's calls with model=NAME or url=HOST (`hermes-replay show "
            f"{where}` lists each request's model and URL), or `reward` when the env makes "
            "them inside compute_reward (HermesAgentBaseEnv does); a cassette whose rollouts "
            "never reached the judge has nothing to re-score")
    failed = live.unanswered()
    if failed:
        shown = "; ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3
                                         else "")
        key = (f" and that ${live.api_key_env} holds its key" if live.api_key_env else
               " (it may need a key: --live-api-key-env VAR)")
        return LiveCallsFailed(
            f"{len(failed)} live call(s) to {live.base_url} got no answer ({shown}), so "
            "those rollouts were scored without it", cassette=where,
            hint=f"check that the endpoint answers (curl {live.base_url}/models){key}, then "
            f"replay {where} again")
    return None
