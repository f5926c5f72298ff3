"""``hermes-replay replay DIR -j N``: replay the cassettes of a folder in N worker processes.

Why processes: a replay is CPU-bound Python (the env, its tokenizer and reward code, the SDK
parsing replies), so threads would share one core. Each worker process replays one cassette
at a time exactly as the sequential main job does (``replay.replay_cassette``: its recorded
command, outputs under ``--out``, the env's output in ``env.log``) and sends back the summary;
the parent prints each summary as its cassette finishes, then one table in the cassettes'
order and one exit code for all of them.

Workers are forked from a fork server (a fresh interpreter started for the purpose: never a fork
of a parent that may run threads, and — unlike ``spawn`` — never a re-run of the parent's main
script); each job carries the parent's working directory and environment as they are when the
job is handed out, since the fork server keeps those of the moment it started. A worker imports
the environment stack once, on its first cassette. What a child printed to stderr (a miss with
its diff, a bad cassette) is printed by the parent under that cassette's summary; its periodic
progress lines are not (the parent reports progress per cassette).
"""

from __future__ import annotations

import io
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import redirect_stderr
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._cli._run_summary import RunSummary

__all__ = ["Job", "Outcome", "default_jobs", "replay_in_processes"]

_PROGRESS_PREFIX = "[hermes-replay] "  # the periodic progress lines of a non-TTY run


@dataclass(frozen=True)
class Job:
    index: int
    cassette: Path
    out_dir: Path
    strict: bool
    verbose: bool
    tools: dict[str, Any]
    cwd: str
    environ: dict[str, str]


@dataclass
class Outcome:
    index: int
    summary: RunSummary
    mode: str
    stderr: str = ""
    archive: bytes | None = None  # --ray-upload: the cassette's out folder, as a tar.gz


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


Replay = Callable[[Path, Path, bool, bool, dict[str, Any]], tuple[RunSummary, str]]


def _replay_one(replay: Replay, job: Job) -> Outcome:
    """In a worker process: one cassette, as the sequential main job replays it (``replay``
    is ``replay.replay_cassette``, passed by reference so this module does not import it)."""
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.environ)
    err = io.StringIO()
    with redirect_stderr(err):
        summary, mode = replay(job.cassette, job.out_dir, job.strict, job.verbose, job.tools)
    shown = "".join(line for line in err.getvalue().splitlines(keepends=True)
                    if not line.startswith(_PROGRESS_PREFIX))
    return Outcome(job.index, summary, mode, shown)


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")  # no fork server on this platform
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # not "__main__": never re-run the parent's script
    return ctx


def replay_in_processes(replay: Replay, jobs: list[Job], workers: int,
                        on_done: Callable[[Outcome], None]) -> tuple[list[Outcome], bool]:
    """Replay ``jobs`` in ``workers`` processes; ``on_done`` hears each as it finishes.

    Returns the outcomes in job order and whether Ctrl-C stopped the run: then no further
    cassette is started, the running ones end as interrupted (the children get the signal
    too) and only what finished is returned. A worker process that died (killed, out of
    memory) is an error outcome for its cassette, never a lost one.
    """
    outcomes: dict[int, Outcome] = {}
    interrupted = False
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context())
    pending: dict[Future[Outcome], Job] = {pool.submit(_replay_one, replay, j): j
                                           for j in jobs}
    try:
        for outcome in _as_done(pending):
            outcomes[outcome.index] = outcome
            on_done(outcome)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [outcomes[j.index] for j in jobs if j.index in outcomes], interrupted


def _as_done(pending: dict[Future[Outcome], Job]) -> Iterator[Outcome]:
    left = set(pending)
    while left:
        done, left = wait(left, return_when=FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: pending[f].index):
            job = pending[future]
            try:
                yield future.result()
            except Exception as exc:  # the worker process died or could not run the job
                summary = RunSummary(mode="replay", cassette=str(job.cassette))
                summary.error = f"the replay worker process failed: {type(exc).__name__}: {exc}"
                yield Outcome(job.index, summary, "?", "")
