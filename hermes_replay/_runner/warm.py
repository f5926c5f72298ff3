"""A warm process to fork runs from: the environment stack imported once, every run a fresh fork.

Why: a replay of a small cassette takes a fraction of a second, but a fresh interpreter first
spends about 3.5 s importing atroposlib's stack (openai, transformers, wandb, numpy, aiohttp).
``hermes-replay watch`` answers every save, so it imports that stack once, here, and forks each
run from this process: a run starts from the imports and nothing else, so whatever the previous
run left behind (module caches, registries, patched globals) is gone, and the user's own modules
are imported fresh from disk, because this process never imports them.

Why a separate interpreter rather than forking the caller: the caller runs threads (the file
watcher's, pytest-xdist's I/O), and a fork of a threaded process may inherit a lock another
thread held. The warm process is single-threaded: it reads jobs from a pipe, forks one child per
job and relays each child's pickled result.

What counts as the user's modules: files under ``user_roots`` (the project) that are not under
the interpreter's prefix (the venv) or hermes-replay's own package. After every run the child
reports the other modules it imported; the warm process imports them too ("learned"), so a stack
the built-in list does not name (say an env's ``datasets``) is warm from the second run on. A
learned import that fails or starts a thread is dropped (a thread would make the next fork
unsafe), and learning stops.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._interpreter import python_command

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
    write (None: inherited)."""

    def __init__(self, preload: Sequence[str], user_roots: Sequence[Path] = (),
                 stdout: int | None = None) -> None:
        self.preload = list(preload)
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
        _send(self._proc.stdin.fileno(), ("preload", self.preload))

    def wait_ready(self) -> float:
        """Block until the preload is imported; returns how long it took (seconds)."""
        if self.import_seconds is None:
            kind, seconds, failed = self._next()
            assert kind == "ready", kind
            self.import_seconds, self.failed_imports = seconds, failed
        return self.import_seconds

    def run(self, calls: Iterable[tuple[Any, Callable[..., Any], tuple[Any, ...]]],
            parallel: int = 1) -> Iterator[Finished]:
        """Run each ``(key, function, args)`` in its own fork, at most ``parallel`` at once;
        yields each as it finishes. ``function`` must be importable (a module-level name)."""
        self.wait_ready()
        todo = list(calls)
        running = 0
        assert self._proc is not None and self._proc.stdin is not None
        while todo or running:
            while todo and running < max(1, parallel):
                key, func, args = todo.pop(0)
                _send(self._proc.stdin.fileno(), ("run", key, func, args))
                running += 1
            kind, *rest = self._next()
            if kind == "done":
                running -= 1
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


def _warm_up() -> None:
    """What every run of an env CLI makes first, made once here for all forks (``fast_cli``):
    a library that cannot load here is the child's to report."""
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
        _serve(result_fd, roots)
    finally:
        for folder in _BYTECODE:
            shutil.rmtree(folder, ignore_errors=True)


def _serve(result_fd: int, roots: list[Path]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller ends us, through the pipe
    cmd_fd = sys.stdin.fileno()
    frames = _Frames()
    sel = selectors.DefaultSelector()
    sel.register(cmd_fd, selectors.EVENT_READ)
    children: dict[int, tuple[Any, int, float, bytearray]] = {}  # fd -> key, pid, start, data
    learning = True
    while True:
        for key_, _ in sel.select():
            fd = key_.fd
            if fd == cmd_fd:
                data = os.read(cmd_fd, 1 << 16)
                if not data:
                    _end_children(children)
                    return
                for frame in frames.feed(data):
                    if frame[0] == "preload":
                        started = time.perf_counter()
                        failed = _import_all(frame[1])
                        _warm_up()
                        _send(result_fd, ("ready", time.perf_counter() - started, failed))
                    elif frame[0] == "run":
                        _purge_user_modules(roots)  # and each module's verdict kept (_USERS)
                        gc.freeze()  # the children need not copy pages to collect these
                        read, pid = _fork_child(frame[2], frame[3], roots, result_fd, cmd_fd,
                                                list(children))
                        children[read] = (frame[1], pid, time.perf_counter(), bytearray())
                        sel.register(read, selectors.EVENT_READ)
                continue
            data = os.read(fd, 1 << 16)
            if data:
                children[fd][3].extend(data)
                continue
            sel.unregister(fd)
            os.close(fd)
            key, pid, started, raw = children.pop(fd)
            _, status, usage = os.wait4(pid, 0)
            finished, learned = _outcome(key, raw, status, time.perf_counter() - started)
            finished.cpu = usage.ru_utime + usage.ru_stime
            _send(result_fd, ("done", finished))
            if learning and learned:
                _import_all(learned)
                # a thread now would be copied half-way into every later child: stop here
                learning = threading.active_count() == 1


def _outcome(key: Any, raw: bytearray, status: int, seconds: float) -> tuple[Finished, list[str]]:
    code = os.waitstatus_to_exitcode(status)
    try:
        kind, payload, learned = pickle.loads(bytes(raw))
    except Exception:
        why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return Finished(key, error=f"the run's process died ({why}) before it reported",
                        seconds=seconds, status=code), []
    if kind == "ok":
        return Finished(key, value=payload, seconds=seconds, status=code), learned
    return Finished(key, error=payload, seconds=seconds, status=code), learned


def _fork_child(func: Callable[..., Any], args: tuple[Any, ...], roots: Sequence[Path],
                *close: Any) -> tuple[int, int]:
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return read, pid
    # the child: never returns
    try:
        os.close(read)
        for fd in (close[0], close[1], *close[2]):
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _keep_bytecode()  # (the user's modules were purged just before the fork)
        before = set(sys.modules)
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
        try:
            data = pickle.dumps((*payload, learned), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            data = pickle.dumps(("error", "the run's result could not be sent back:\n"
                                 + traceback.format_exc(), []))
        view = memoryview(data)
        while view:
            view = view[os.write(write, view):]
        os.close(write)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


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


def _end_children(children: dict[int, tuple[Any, int, float, bytearray]]) -> None:
    for _, pid, _, _ in children.values():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    for _, pid, _, _ in children.values():
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
