"""The one runner of a recorded cassette, shared by every way in: ``hermes-replay replay`` (a
folder, its ``-j`` workers and Ray actors, ``watch``), ``replay_corpus`` and the pytest plugin's
``replay_run``. It re-runs the cassette (``_runner.run.run_cassette``: its recorded command,
outputs in ``out_dir`` with ``result.json`` for ``diff`` and ``report``), and judges the run
once (``summary.summarize``): the summary row, its status and the message to show.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hermes_replay._corpus.summary import RunSummary, failed, status, summarize
from hermes_replay._runner.options import RunOptions
from hermes_replay._terminal.render import shown_path

__all__ = ["CassetteResult", "RunHooks", "run_one"]


@dataclass(frozen=True)
class RunHooks:
    """What a caller watching one run live gives it: where the env's output goes (``output``
    makes the redirection for each run from its log path, None under ``verbose``; without it
    the output goes into ``<out_dir>/env.log``) and who hears each finished rollout and
    session event (the CLI's progress line)."""

    output: Callable[[Path | None], AbstractContextManager[Any]] | None = None
    on_rollout: Callable[[str, dict[str, Any]], None] | None = None
    on_event: Callable[[Any], None] | None = None


@dataclass
class CassetteResult:
    """One replayed cassette.

    ``summary`` is the row (rollouts, turns, misses, unused recordings, mean reward, changed
    rewards, error); ``status`` its verdict (``ok``, ``CHANGED``, ``MISS``, ``ERROR``, ``skip``);
    ``message`` what there is to say about it (a miss with its diffs, an error) and ``output``
    what its worker printed besides. ``out_dir`` holds its outputs (``result.json``, the env's
    groups and log). ``run`` (the ``RunResult``) and ``error`` are there when the cassette ran
    in this process; a worker process or Ray actor sends back the rest only.
    """

    cassette: Path
    out_dir: Path
    mode: str  # the recorded command's mode (process, evaluate, serve; "?" when unknown)
    summary: RunSummary
    message: str = ""
    output: str = ""
    index: int = 0  # its place in the corpus
    rel: str = ""  # its path relative to the corpus (posix)
    run: Any = None
    error: BaseException | None = None

    @property
    def status(self) -> str:
        return status(self.summary)

    @property
    def failed(self) -> bool:
        return failed(self.summary)

    def detached(self) -> CassetteResult:
        """This result as plain data, to send to another process (no live objects)."""
        return replace(self, run=None, error=None)


def run_one(cassette: Path, out_dir: Path, options: RunOptions, *,
            command: Sequence[str] | None = None, verbose: bool = False,
            hooks: RunHooks | None = None, mode: str = "?") -> CassetteResult:
    """Re-run ``cassette`` into ``out_dir`` as ``options`` say and judge it.

    Never raises for a run that failed: the failure is the result's summary, message and
    ``error`` (``KeyboardInterrupt`` included: exit 130/143, the caller stops). ``verbose``
    shows the env's output instead of writing ``env.log`` and every miss's diff in full.
    (A corpus re-scored with a live judge runs ``rescore`` instead: K runs, one row.)"""
    summary, message, run, error = attempt(cassette, out_dir, options, command=command,
                                           verbose=verbose, hooks=hooks)
    summary.cassette = str(cassette)
    return CassetteResult(cassette, out_dir, mode, summary, message, run=run, error=error)


def attempt(cassette: Path, out_dir: Path, options: RunOptions, *,
            command: Sequence[str] | None = None, verbose: bool = False,
            hooks: RunHooks | None = None,
            rescored: Path | None = None) -> tuple[RunSummary, str, Any, BaseException | None]:
    """One run of ``cassette``: its summary, the message to show, the ``RunResult`` (None if
    it never started) and the error that failed it."""
    from hermes_replay._runner.run import run_cassette

    hooks = hooks or RunHooks()
    log = None if verbose else out_dir / "env.log"
    output = hooks.output(log) if hooks.output is not None else None
    if output is None and verbose:
        from hermes_replay._runner.envrun import shown_on

        output = shown_on(sys.stdout, sys.stderr)
    result = error = None
    try:
        result = run_cassette(cassette, options, out_dir=out_dir, command=command,
                              raise_errors=False, output=output, on_rollout=hooks.on_rollout,
                              on_event=hooks.on_event, rescored=rescored)
        error = result.error
        summary, message = summarize(options.mode, cassette, result, None, log=log,
                                     verbose=verbose, normalizers=list(options.normalizers))
    except (KeyboardInterrupt, Exception) as exc:
        from hermes_replay._errors import HermesReplayError

        if not isinstance(exc, (KeyboardInterrupt, HermesReplayError)):
            raise  # a defect of ours: its traceback, not a row
        error = exc
        summary, message = summarize(options.mode, cassette, None, exc, log=log,
                                     verbose=verbose)
    if summary.log:
        summary.log = shown_path(Path(summary.log))
    return summary, message, result, error
