"""The ``local`` executor with ``jobs > 1`` (``replay DIR -j N``): the cassettes of a corpus
in N worker processes.

Why processes: a replay is CPU-bound Python (the env, its tokenizer and reward code, the SDK
parsing replies), so threads would share one core. Each worker process replays one cassette
at a time exactly as the sequential path does (``job.replay_job``: its recorded command,
outputs under the out folder, the env's output in ``env.log``) and sends back its result; the
caller hears each as its cassette finishes.

Workers are forked from a fork server (a fresh interpreter started for the purpose: never a fork
of a parent that may run threads, and — unlike ``spawn`` — never a re-run of the parent's main
script); each job carries the parent's working directory and environment as they are when the
job is handed out, since the fork server keeps those of the moment it started. A worker imports
the environment stack once, on its first cassette. What a child printed to stderr comes back
as the result's ``output``; its periodic progress lines do not (the parent reports progress
per cassette).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import redirect_stderr
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from hermes_replay._corpus.job import Job, replay_job
from hermes_replay._corpus.one import CassetteResult
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._interpreter import safe_path_environ
from hermes_replay._runner.env_children import end_env_children

__all__ = ["default_jobs", "replay_in_processes", "without_progress"]

_PROGRESS_PREFIX = "[hermes-replay] "  # the periodic progress lines of a non-TTY run


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def without_progress(text: str) -> str:
    """What a worker printed, less its periodic progress lines."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith(_PROGRESS_PREFIX))


def _replay_one(job: Job) -> CassetteResult:
    """In a worker process: one cassette, as the sequential path replays it."""
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.environ)
    err = io.StringIO()
    with redirect_stderr(err):
        result = replay_job(job)
    result.output = without_progress(err.getvalue())
    return result.detached()


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
        try:
            # os._exit would leave an env's own pool with no parent. The replay still running
            # on the main thread may be starting one (the next cassette's env): no process
            # starts from now on, and one already on its way is ended by the second pass.
            multiprocessing.process.BaseProcess.start = _refuse_to_start  # type: ignore[method-assign]
            end_env_children(grace=1)
            time.sleep(0.1)
            end_env_children(grace=1)
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="hermes-replay-parent-watch", daemon=True).start()


def _refuse_to_start(self: Any) -> None:
    raise RuntimeError("this replay worker is ending: its parent is gone")


def _worker(conn: Connection, alive: Connection) -> None:
    """A worker process: replay the jobs the parent sends, one at a time, until told to stop."""
    _die_with_parent(alive)
    try:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError, KeyboardInterrupt):
                return
            if job is None:
                return
            conn.send(_replay_one(job))
    finally:
        end_env_children()  # an env's own process pool, say: see that module


@dataclass
class _Proc:
    process: Any
    conn: Connection
    alive: Connection  # the parent's end of the worker's liveness pipe (never written)
    job: Job | None = None


def _start(ctx: Any) -> _Proc:
    conn, child = ctx.Pipe()
    alive_r, alive_w = ctx.Pipe(duplex=False)
    # Not daemonic: a daemonic process may not start children, so an env's own
    # ProcessPoolExecutor (math_server_zero grades in one) died in the worker while its own
    # `python -m … process` ran fine. Nothing needed the flag: the worker dies with its parent
    # through `alive`, and replay_in_processes stops (or kills) every worker in its finally.
    process = ctx.Process(target=_worker, args=(child, alive_r), daemon=False,
                          name="hermes-replay-worker")
    # the fork server and resource tracker (or, with spawn, the worker itself) are started by
    # multiprocessing as `python -c …`: never with the working folder (a download of
    # cassettes, maybe) on their sys.path (issue 46, finding 01)
    with safe_path_environ():
        process.start()
    child.close()
    alive_r.close()
    return _Proc(process, conn, alive_w)


def _died(job: Job, exitcode: int | None) -> CassetteResult:
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
    return CassetteResult(job.cassette, job.out_dir, "?", summary, index=job.index,
                          rel=job.rel)


def replay_in_processes(jobs: list[Job], workers: int, on_done: Callable[[CassetteResult], None]
                        ) -> tuple[list[CassetteResult], bool]:
    """Replay ``jobs`` in ``workers`` processes; ``on_done`` hears each as it finishes.

    Returns the outcomes in job order and whether Ctrl-C stopped the run: then no further
    cassette is started, the running ones end as interrupted (the children get the signal
    too) and only what finished is returned. A worker process that died (killed, out of
    memory) is one error outcome for the cassette it was replaying; a new worker takes the
    cassettes still to come. (A ``ProcessPoolExecutor`` fails every pending job instead.)
    """
    ctx = _context()
    todo = deque(jobs)
    outcomes: dict[int, CassetteResult] = {}
    procs: list[_Proc] = []
    interrupted = False

    def hand_out(proc: _Proc) -> None:
        proc.job = todo.popleft() if todo else None
        if proc.job is not None:
            proc.conn.send(proc.job)

    try:
        for _ in range(min(workers, len(jobs))):
            procs.append(_start(ctx))
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
                    procs[procs.index(proc)] = proc = _start(ctx) if todo else proc
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
