"""A warm process to fork runs from: the environment stack imported once, every batch of runs
a fresh fork.

Why: a replay of a small cassette takes a fraction of a second, but a fresh interpreter first
spends about 3.5 s importing atroposlib's stack (openai, transformers, wandb, numpy, aiohttp).
``hermes-replay watch`` answers every save, so it imports that stack once, here, and forks the
runs of each save from this process: they start from the imports and nothing else, so whatever
an earlier save's runs left behind (module caches, registries, patched globals) is gone, and the
user's own modules are imported fresh from disk, because this process never imports them.

Why workers that run several jobs rather than one fork per job: the first run in a fork pays
for every page it touches being copied from this process and for the lazy set-up of the
libraries (about 0.1 s of CPU for one of the shipped cassettes, half a steady run's cost); a
save that replays fifteen cassettes on two cores paid it fifteen times. A batch
(:meth:`WarmProcess.run`) now goes to at most ``parallel`` workers, each taking the next job as
it becomes free, the way ``replay DIR -j N``'s workers take cassettes one after another. Before
each job a worker forgets the user's modules again, so every job imports them anew from disk,
as a fresh fork would; what libraries keep between jobs of one batch is what they keep between
the cassettes of ``replay DIR``.

Why a separate interpreter rather than forking the caller: the caller runs threads (the file
watcher's, pytest-xdist's I/O), and a fork of a threaded process may inherit a lock another
thread held. The warm process is single-threaded: it reads batches from a pipe, forks the
workers, hands out the jobs and relays each job's pickled result as it arrives.

What counts as the user's modules: files under ``user_roots`` (the project) that are not under
the interpreter's prefix (the venv) or hermes-replay's own package. After every job the worker
reports the other modules it imported; the warm process imports them too ("learned"), so a stack
the built-in list does not name (say an env's ``datasets``) is warm from the next batch on. A
learned import that fails or starts a thread is dropped (a thread would make the next fork
unsafe), and learning stops.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._interpreter import python_command
from hermes_replay._runner.env_children import end_env_children

__all__ = ["Finished", "WarmProcess", "WarmProcessDied"]

_HEADER = struct.Struct("!Q")


class WarmProcessDied(RuntimeError):
    """The warm process exited or could not start; the message carries its last words."""


@dataclass
class Finished:
    """One run's outcome: ``value`` the function's return, or ``error`` a traceback."""

    key: Any
    value: Any = None
    error: str | None = None
    seconds: float = 0.0  # wall, fork to report
    cpu: float = 0.0  # the child's CPU time (user + system), what a busy machine cannot inflate
    status: int = 0  # the child's wait status code (0 a clean exit)


# ------------------------------------------------------------------ framing (both sides)


def _send(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class _Frames:
    """Collects bytes read from a pipe and yields each complete pickled frame."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[Any]:
        self.buffer += data
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                return
            frame = bytes(self.buffer[_HEADER.size:_HEADER.size + size])
            del self.buffer[:_HEADER.size + size]
            yield pickle.loads(frame)


# ------------------------------------------------------------------ the caller's side


class WarmProcess:
    """Start with :meth:`start`, run calls with :meth:`run`, end with :meth:`close` (or use it
    as a context manager). ``preload`` names the modules to import before the first fork;
    ``user_roots`` are where the user's modules live (never imported here, purged from a child
    if a library imported them); ``stdout`` is where the warm process and its children may
    write (None: inherited). ``warmup`` (an importable function and its arguments, never the
    user's code) makes spare workers: after each batch, as many workers as it ran are forked
    and run it while the user edits, so the next batch's first jobs find pages copied and
    libraries set up."""

    def __init__(self, preload: Sequence[str], user_roots: Sequence[Path] = (),
                 stdout: int | None = None,
                 warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None = None) -> None:
        self.preload = list(preload)
        self.warmup = warmup
        self.user_roots = [Path(p).resolve() for p in user_roots]
        self.stdout = stdout
        self.import_seconds: float | None = None
        self.failed_imports: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._results = -1
        self._frames = _Frames()

    # The warm process is started with the caller's sys.path (like multiprocessing's fork
    # server), never with the working directory prepended the way `-c` would: a project's
    # ``environments/`` folder would shadow the installed package of that name.
    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        code = ("import sys; sys.path[:] = sys.argv[3:]; "
                "from hermes_replay._runner.warm import serve; "
                "serve(int(sys.argv[1]), sys.argv[2])")
        try:
            self._proc = subprocess.Popen(
                python_command("-c", code, str(write_fd),
                               os.pathsep.join(str(p) for p in self.user_roots),
                               *(p for p in sys.path if p not in ("", "."))),
                stdin=subprocess.PIPE, stdout=self.stdout, stderr=self.stdout,
                pass_fds=(write_fd,), start_new_session=True)
        finally:
            os.close(write_fd)
        self._results = read_fd
        assert self._proc.stdin is not None
        _send(self._proc.stdin.fileno(), ("preload", self.preload, self.warmup))

    def wait_ready(self) -> float:
        """Block until the preload is imported; returns how long it took (seconds)."""
        if self.import_seconds is None:
            kind, seconds, failed = self._next()
            assert kind == "ready", kind
            self.import_seconds, self.failed_imports = seconds, failed
        return self.import_seconds

    def run(self, calls: Iterable[tuple[Any, Callable[..., Any], tuple[Any, ...]]],
            parallel: int = 1) -> Iterator[Finished]:
        """Run each ``(key, function, args)``, at most ``parallel`` at once, in workers forked
        for this call; yields each as it finishes. ``function`` must be importable (a
        module-level name)."""
        self.wait_ready()
        todo = list(calls)
        assert self._proc is not None and self._proc.stdin is not None
        _send(self._proc.stdin.fileno(), ("batch", todo, parallel))
        for _ in todo:
            kind, *rest = self._next()
            assert kind == "done", kind
            yield rest[0]

    def _next(self) -> Any:
        while True:
            for frame in self._frames.feed(b""):
                return frame
            data = os.read(self._results, 1 << 16)
            if not data:
                code = self._proc.wait() if self._proc is not None else None
                raise WarmProcessDied(f"the warm process exited (code {code})")
            self._frames.buffer += data

    def close(self, timeout: float = 5.0) -> None:
        """End the warm process and any run still going (its children get SIGTERM)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: the warm process ends its children, then itself
            proc.wait(timeout)
        except (subprocess.TimeoutExpired, OSError):
            proc.kill()
            proc.wait()
        finally:
            os.close(self._results)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> WarmProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ the warm process


def _excluded() -> list[Path]:
    """Never the user's, even under a user root: the interpreter's prefix and hermes-replay."""
    here = Path(__file__).resolve().parents[1]  # the hermes_replay package
    return [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), here]


# (module file, user roots) -> whether it is the user's. Resolving every module's path (2,000
# of them once the stack is imported) was a fifth of a forked run's CPU, paid twice per run;
# the warm process fills this before each fork, so a child resolves only what it imported.
_USERS: dict[tuple[str, tuple[Path, ...]], bool] = {}


def _is_users(file: str | None, roots: Sequence[Path], excluded: Sequence[Path]) -> bool:
    if not file:
        return False
    key = (file, tuple(roots))
    known = _USERS.get(key)
    if known is None:
        path = Path(file).resolve()
        known = _USERS[key] = (any(path.is_relative_to(r) for r in roots)
                               and not any(path.is_relative_to(x) for x in excluded))
    return known


def user_module_files(roots: Sequence[Path]) -> list[str]:
    """Files of the imported modules that are the user's (what a run depended on)."""
    from hermes_replay._runner.envrun import FORGOTTEN_FILES

    excluded, roots = _excluded(), [Path(r).resolve() for r in roots]  # as the warm's
    found = {str(Path(m.__file__).resolve()) for m in list(sys.modules.values())
             if _is_users(getattr(m, "__file__", None), roots, excluded)}
    # a package env's modules (``from .rewards import …``) are forgotten when its run ends
    found |= {f for f in FORGOTTEN_FILES if _is_users(f, roots, excluded)}
    return sorted(found)


def _import_all(names: Iterable[str]) -> list[str]:
    failed = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # a library that cannot load here: the child imports it itself
            failed.append(name)
    return failed


def _make_cli_caches() -> None:
    """What every run of an env CLI makes first, made once here for all forks (``fast_cli``;
    not the spares' warm-up, which runs in each spare): a library that cannot load here is
    the child's to report."""
    try:
        from hermes_replay._runner.fast_cli import warm_up

        warm_up()
    except Exception:
        pass


def serve(result_fd: int, roots_text: str) -> None:
    """The warm process's loop (started by :meth:`WarmProcess.start`)."""
    roots = [Path(p) for p in roots_text.split(os.pathsep) if p]
    if sys.dont_write_bytecode:
        _BYTECODE.append(tempfile.mkdtemp(prefix="hermes-replay-bytecode-"))
    try:
        _Serve(result_fd, roots).loop()
    finally:
        for folder in _BYTECODE:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass
class _Worker:
    """A fork of the warm process that runs one batch's jobs, one at a time, until its job
    pipe closes (``jobs`` -1: it is on its way out). ``job`` is the key of the job it runs
    now and when it was handed out."""

    pid: int
    jobs: int  # the warm process writes jobs here
    results: int  # and reads the worker's reports here
    frames: _Frames = field(default_factory=lambda: _Frames())
    job: tuple[Any, float] | None = None
    batch: int | None = None  # the batch whose jobs it runs (None: a spare, not used yet)
    warming: bool = False  # a spare whose warm-up has not reported yet
    call: tuple[Callable[..., Any], tuple[Any, ...]] | None = None  # the job's, to hand again


class _Serve:
    """The warm process's loop: preload on request, then each batch's jobs handed out to at
    most ``parallel`` workers as they become free, each report relayed as it arrives."""

    def __init__(self, result_fd: int, roots: list[Path]) -> None:
        self.result_fd, self.roots = result_fd, roots
        self.cmd_fd = sys.stdin.fileno()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.cmd_fd, selectors.EVENT_READ)
        # (batch, key, function, args); batches in the order they came
        self.todo: deque[tuple[int, Any, Callable[..., Any], tuple[Any, ...]]] = deque()
        self.batches = 0
        self.parallel = 1
        self.warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
        self.workers: dict[int, _Worker] = {}  # by their results fd
        self.learning = True

    def loop(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller ends us, through the pipe
        frames = _Frames()
        while True:
            for key_, _ in self.sel.select():
                if key_.fd != self.cmd_fd:
                    self._from_worker(self.workers[key_.fd])
                    continue
                data = os.read(self.cmd_fd, 1 << 16)
                if not data:
                    _end_workers(list(self.workers.values()))
                    return
                for frame in frames.feed(data):
                    if frame[0] == "preload":
                        started = time.perf_counter()
                        failed = _import_all(frame[1])
                        _make_cli_caches()
                        self.warmup = frame[2]
                        _send(self.result_fd, ("ready", time.perf_counter() - started, failed))
                    elif frame[0] == "batch":
                        self.batches += 1
                        self.todo.extend((self.batches, *call) for call in frame[1])
                        self.parallel = max(1, frame[2])
            self._hand_out()

    def _hand_out(self) -> None:
        """Workers of a batch whose jobs are all out are retired (a batch never runs where an
        earlier one ran); each idle worker gets the next job of its batch (a spare, of any);
        new workers are forked while jobs wait and fewer than ``parallel`` run; and when a
        batch has run and no job is left or running, spares are forked to warm up for the
        next (never before the first batch: warming up would only delay it)."""
        waiting = {job[0] for job in self.todo}
        for worker in self._live():
            if worker.job is None and worker.batch is not None and worker.batch not in waiting:
                self._retire(worker)
        for worker in self._live():
            if worker.job is None and self.todo and worker.batch in (None, self.todo[0][0]):
                self._give(worker)
        while self.todo and len(self._live()) < self.parallel:
            self._give(self._fork(None))  # a job waits: no warm-up to delay it
        if self.warmup is not None and self.batches and not self.todo \
                and all(w.job is None for w in self.workers.values()):
            while len(self._live()) < self.parallel:
                self._fork(self.warmup)

    def _live(self) -> list[_Worker]:
        return [w for w in self.workers.values() if w.jobs >= 0]

    def _fork(self, warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None) -> _Worker:
        _purge_user_modules(self.roots)  # and each module's verdict kept (_USERS)
        gc.freeze()  # the workers need not copy pages to collect these
        worker = _fork_worker(self.roots, warmup, self.result_fd, self.cmd_fd,
                              [(w.jobs, w.results) for w in self.workers.values()])
        worker.warming = warmup is not None
        self.workers[worker.results] = worker
        self.sel.register(worker.results, selectors.EVENT_READ)
        return worker

    def _give(self, worker: _Worker) -> None:
        batch, key, func, args = self.todo.popleft()
        worker.job, worker.batch, worker.call = (key, time.perf_counter()), batch, (func, args)
        _send(worker.jobs, (key, func, args))

    @staticmethod
    def _retire(worker: _Worker) -> None:
        os.close(worker.jobs)  # EOF: the worker exits
        worker.jobs = -1

    def _from_worker(self, worker: _Worker) -> None:
        data = os.read(worker.results, 1 << 16)
        if data:
            for kind, *rest in worker.frames.feed(data):
                if kind == "warmed":
                    worker.warming = False
                    self._warmed(rest[0])
                    continue
                assert kind == "done", kind
                key, outcome, payload, learned, cpu = rest
                assert worker.job is not None
                seconds = time.perf_counter() - worker.job[1]
                worker.job = None
                finished = (Finished(key, value=payload, seconds=seconds, cpu=cpu)
                            if outcome == "ok" else
                            Finished(key, error=payload, seconds=seconds, cpu=cpu))
                _send(self.result_fd, ("done", finished))
                self._learn(learned)
            return
        self.sel.unregister(worker.results)
        os.close(worker.results)
        if worker.jobs >= 0:
            os.close(worker.jobs)
        del self.workers[worker.results]
        _, status, usage = os.wait4(worker.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if worker.warming:  # died warming up (killed for memory, say): never the job's fault
            why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            self._warmed(f"the spare worker died ({why})")
            if worker.job is not None:  # handed out before it was ready: it goes first again
                assert worker.batch is not None and worker.call is not None
                self.todo.appendleft((worker.batch, worker.job[0],
                                      *worker.call))
            return
        if worker.job is not None:  # it died with a job in hand: that job's report
            why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            _send(self.result_fd, ("done", Finished(
                worker.job[0], error=f"the run's process died ({why}) before it reported",
                seconds=time.perf_counter() - worker.job[1],
                cpu=usage.ru_utime + usage.ru_stime, status=code)))

    def _warmed(self, error: str | None) -> None:
        """A spare's warm-up failed: later workers start cold (the runs are unharmed: a
        warm-up only saves time), and the failure is said once, in one line."""
        if error is not None and self.warmup is not None:
            self.warmup = None
            last = error.strip().splitlines()[-1] if error.strip() else "no message"
            print(f"hermes-replay: the workers' warm-up failed ({last}); runs go on without "
                  "it", file=sys.stderr, flush=True)

    def _learn(self, learned: list[str]) -> None:
        if self.learning and learned:
            _import_all(learned)
            # a thread now would be copied half-way into every later worker: stop here
            self.learning = threading.active_count() == 1


def _fork_worker(roots: Sequence[Path],
                 warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None,
                 *close: Any) -> _Worker:
    jobs_read, jobs_write = os.pipe()
    results_read, results_write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(jobs_read)
        os.close(results_write)
        return _Worker(pid, jobs_write, results_read)
    # the worker: never returns
    inherited = set(weakref.finalize._registry)  # type: ignore[attr-defined]
    try:
        os.close(jobs_write)
        os.close(results_read)
        for fd in (close[0], close[1], *(fd for pair in close[2] for fd in pair if fd >= 0)):
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _keep_bytecode()  # (the user's modules were purged just before the fork)
        _work(jobs_read, results_write, roots, warmup)
    finally:
        end_env_children()  # an env's own process pool, say: os._exit would orphan it
        _finalize_own(inherited)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _finalize_own(inherited: set[Any]) -> None:
    """What a normal exit would clean up, for what the worker made itself: the ``atexit``
    finalizers registered since the fork (a library's module-level temporary folder, say
    wandb's two, made when a run first imports it). ``os._exit`` skips them all, and the
    inherited ones must be skipped: they are the warm process's, and would remove its
    folders."""
    for finalizer in list(weakref.finalize._registry):  # type: ignore[attr-defined]
        if finalizer not in inherited and finalizer.atexit:
            try:
                finalizer()
            except Exception:  # a cleanup that fails must not cost the others theirs
                pass


def _work(jobs: int, results: int, roots: Sequence[Path],
          warmup: tuple[Callable[..., Any], tuple[Any, ...]] | None) -> None:
    """The worker's loop: the warm-up first, if any (its CPU charged to no job); then each
    job as a fresh run would see it — the user's modules imported anew from disk (a job
    before it may have imported them), its own list of the package files it imported — and
    its report sent as soon as it ends."""
    frames, before, spent = _Frames(), set(sys.modules), 0.0
    if warmup is not None:
        try:
            warmup[0](*warmup[1])
            error = None
        except BaseException:
            error = traceback.format_exc()
        _send(results, ("warmed", error))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        spent = usage.ru_utime + usage.ru_stime
    for key, func, args in _jobs(jobs, frames):
        _purge_user_modules(roots)
        envrun = sys.modules.get("hermes_replay._runner.envrun")
        if envrun is not None:
            envrun.FORGOTTEN_FILES.clear()  # the files of this job's run, not an earlier one's
        try:
            payload: tuple[str, Any] = ("ok", func(*args))
        except BaseException:
            payload = ("error", traceback.format_exc())
        excluded = _excluded()
        learned = sorted(name for name in set(sys.modules) - before
                         if not name.startswith("__")
                         and not _is_users(getattr(sys.modules[name], "__file__", None),
                                           roots, excluded)
                         and getattr(sys.modules[name], "__file__", None))
        before |= set(learned)
        usage = resource.getrusage(resource.RUSAGE_SELF)  # zero at the fork
        cpu, spent = usage.ru_utime + usage.ru_stime - spent, usage.ru_utime + usage.ru_stime
        try:  # (pickled whole before a byte is written: a failure here half-sends nothing)
            _send(results, ("done", key, *payload, learned, cpu))
        except Exception:
            _send(results, ("done", key, "error", "the run's result could not be sent back:\n"
                            + traceback.format_exc(), [], cpu))


def _jobs(fd: int, frames: _Frames) -> Iterator[tuple[Any, Callable[..., Any], tuple[Any, ...]]]:
    """The jobs the warm process hands this worker, until it closes the pipe."""
    while True:
        for frame in frames.feed(b""):
            yield frame
            break
        else:
            data = os.read(fd, 1 << 16)
            if not data:
                return
            frames.buffer += data


_BYTECODE: list[str] = []  # the warm process's bytecode folder, made on first use


def _keep_bytecode() -> None:
    """With ``PYTHONDONTWRITEBYTECODE`` every run would compile the user's modules again (0.2
    s for an env and the Hermes layer): a child writes their bytecode into a folder of the warm
    process instead (never into the user's tree), where the next child finds it."""
    if sys.dont_write_bytecode and _BYTECODE:
        sys.pycache_prefix = _BYTECODE[0]
        sys.dont_write_bytecode = False


def _purge_user_modules(roots: Sequence[Path]) -> None:
    """A library the warm process imported may have imported a user module: forget it, so the
    run imports the file as it is now."""
    excluded = _excluded()
    for name, module in list(sys.modules.items()):
        if _is_users(getattr(module, "__file__", None), roots, excluded):
            del sys.modules[name]


def _end_workers(workers: list[_Worker]) -> None:
    """End every worker: a run in hand is stopped (SIGTERM); a worker with none is let go
    (EOF), so it exits the way a retired one does, running its own cleanup (the temporary
    folders a run's libraries made: a signal would leave them in /tmp). Retired workers are
    only waited for; any still there after 5 s is killed."""
    for worker in workers:
        if worker.job is not None:
            try:
                os.kill(worker.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif worker.jobs >= 0:
            _Serve._retire(worker)
    deadline = time.monotonic() + 5
    for worker in workers:
        while time.monotonic() < deadline:
            done, _ = os.waitpid(worker.pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(worker.pid, signal.SIGKILL)
            os.waitpid(worker.pid, 0)
