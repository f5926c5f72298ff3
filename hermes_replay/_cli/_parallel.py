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
import signal
import threading
from collections import deque
from collections.abc import Callable
from contextlib import redirect_stderr
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
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


def _die_with_parent(alive: Connection) -> None:
    """End this worker when the parent is gone: ``alive``'s other end is held by the parent
    only, so it reads EOF the moment the parent dies (even SIGKILLed, when nothing else could
    tell the worker). A SIGKILLed ``replay -j`` left its workers running for good, and with
    them the fork server and the resource tracker they keep alive."""
    def watch() -> None:
        try:
            alive.recv()
        except (EOFError, OSError):
            pass
        os._exit(1)

    threading.Thread(target=watch, name="hermes-replay-parent-watch", daemon=True).start()


def _worker(replay: Replay, conn: Connection, alive: Connection) -> None:
    """A worker process: replay the jobs the parent sends, one at a time, until told to stop."""
    _die_with_parent(alive)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if job is None:
            return
        conn.send(_replay_one(replay, job))


@dataclass
class _Proc:
    process: Any
    conn: Connection
    alive: Connection  # the parent's end of the worker's liveness pipe (never written)
    job: Job | None = None


def _start(ctx: Any, replay: Replay) -> _Proc:
    conn, child = ctx.Pipe()
    alive_r, alive_w = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_worker, args=(replay, child, alive_r), daemon=True,
                          name="hermes-replay-worker")
    process.start()
    child.close()
    alive_r.close()
    return _Proc(process, conn, alive_w)


def _died(job: Job, exitcode: int | None) -> Outcome:
    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode}"
    summary = RunSummary(mode="replay", cassette=str(job.cassette))
    summary.error = (f"the replay worker process died while replaying {job.cassette} ({how}: "
                     "out of memory, or killed); the other cassettes ran on. Next step: replay "
                     f"it alone to see why (hermes-replay replay {job.cassette} -v)")
    return Outcome(job.index, summary, "?", "")


def replay_in_processes(replay: Replay, jobs: list[Job], workers: int,
                        on_done: Callable[[Outcome], None]) -> tuple[list[Outcome], bool]:
    """Replay ``jobs`` in ``workers`` processes; ``on_done`` hears each as it finishes.

    Returns the outcomes in job order and whether Ctrl-C stopped the run: then no further
    cassette is started, the running ones end as interrupted (the children get the signal
    too) and only what finished is returned. A worker process that died (killed, out of
    memory) is one error outcome for the cassette it was replaying; a new worker takes the
    cassettes still to come. (A ``ProcessPoolExecutor`` fails every pending job instead.)
    """
    ctx = _context()
    todo = deque(jobs)
    outcomes: dict[int, Outcome] = {}
    procs: list[_Proc] = []
    interrupted = False

    def hand_out(proc: _Proc) -> None:
        proc.job = todo.popleft() if todo else None
        if proc.job is not None:
            proc.conn.send(proc.job)

    try:
        for _ in range(min(workers, len(jobs))):
            procs.append(_start(ctx, replay))
            hand_out(procs[-1])
        while any(p.job is not None for p in procs):
            busy = [p for p in procs if p.job is not None]
            ready = set(wait([p.conn for p in busy] + [p.process.sentinel for p in busy]))
            for proc in busy:
                if proc.conn not in ready and proc.process.sentinel not in ready:
                    continue
                assert proc.job is not None
                try:
                    outcome = proc.conn.recv()
                except (EOFError, OSError):  # it died mid-job: this cassette only
                    proc.process.join(5)
                    outcome = _died(proc.job, proc.process.exitcode)
                    _stop(proc)
                    procs[procs.index(proc)] = proc = _start(ctx, replay) if todo else proc
                outcomes[outcome.index] = outcome
                on_done(outcome)
                if proc.process.is_alive():
                    hand_out(proc)
                else:
                    proc.job = None
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for proc in procs:
            _stop(proc, grace=5 if interrupted else 30)
    return [outcomes[j.index] for j in jobs if j.index in outcomes], interrupted


def _stop(proc: _Proc, grace: float = 30) -> None:
    """Ask a worker to end (it finishes nothing new), then make sure it has."""
    try:
        proc.conn.send(None)
    except (OSError, ValueError):
        pass
    proc.process.join(grace)
    if proc.process.is_alive():
        proc.process.kill()
        proc.process.join(5)
    for conn in (proc.conn, proc.alive):
        conn.close()
