"""Run an environment file's own CLI in this process, as ``python ENV_FILE ARGS…`` would.

In-process (``runpy``), not a subprocess, because the cassette's interception lives in this
interpreter: the env's openai/httpx/aiohttp clients are patched only here. Used by
``hermes_replay._runner.run``, the one runner.
"""

from __future__ import annotations

import ast
import io
import logging
import runpy
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hermes_replay._pyast import parse

__all__ = ["FORGOTTEN_FILES", "OutcomeCollector", "file_of_module", "module_below", "module_of",
           "redirected_to", "run_env_file", "shown_on"]


def _has_relative_imports(path: Path) -> bool:
    try:
        tree = parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree))


def module_of(env_file: Path, root: Path | None = None) -> tuple[str, Path] | None:
    """``(dotted module name, the folder ``python -m`` runs from)`` when ``env_file`` can
    only run as ``python -m pkg.env``: it imports relatively and lies in a package — a
    regular one (``__init__.py`` up the chain), or, below ``root``, a namespace package
    (no ``__init__.py``), the way Atropos runs ``python -m environments.community.x.y``
    from its repository root. Else None (a plain script)."""
    path = env_file.resolve()
    if not _has_relative_imports(path):
        return None
    if (path.parent / "__init__.py").is_file():
        parts, folder = [path.stem], path.parent
        while (folder / "__init__.py").is_file():
            parts.insert(0, folder.name)
            folder = folder.parent
        return (".".join(parts), folder) if all(p.isidentifier() for p in parts) else None
    return module_below(path, root) if root is not None else None


def module_below(path: Path, root: Path) -> tuple[str, Path] | None:
    """``path`` as a module of ``root`` (``root/a/b/c.py`` → ``a.b.c``), if it lies in a
    package below it with a name ``python -m`` accepts; else None."""
    root, path = root.resolve(), path.resolve()
    if path.suffix != ".py" or path.parent == root or not path.is_relative_to(root):
        return None
    parts = [*path.relative_to(root).parent.parts, path.stem]
    return (".".join(parts), root) if all(p.isidentifier() for p in parts) else None


def file_of_module(name: str, start: Path) -> Path | None:
    """Where ``python -m NAME`` run from ``start`` finds NAME's file: ``start/a/b/c.py`` (a
    namespace or a regular package), else in a folder on ``sys.path``. Looked up, never
    imported."""
    if not all(part.isidentifier() for part in name.split(".")):
        return None
    rel = Path(*name.split(".")).with_suffix(".py")
    for folder in [start, *(Path(p) for p in sys.path if p)]:
        candidate = folder / rel
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            continue
    return None


@contextmanager
def _as_script(env_file: Path, argv: Sequence[str], root: Path | None = None) -> Iterator[None]:
    """``sys.argv``/``sys.path[0]`` as ``python ENV_FILE ARGV…`` (or ``python -m`` from
    ``root``) sets them; restored after."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(env_file), *argv]
    sys.path.insert(0, str(root if root is not None else env_file.resolve().parent))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


# Files of the package modules a run imported and ``_fresh_package`` forgot after it: what
# the run depended on although they are no longer in ``sys.modules`` (``watch`` asks).
FORGOTTEN_FILES: set[str] = set()


@contextmanager
def _fresh_package(top: str, root: Path) -> Iterator[None]:
    """The env's package is imported anew for this run and forgotten after it, so a second run
    in this process (replay after record, a reward edited in between) runs today's files.
    Only modules whose files lie under ``root`` (the folder ``python -m`` runs from) are
    forgotten: in a namespace package shared with installed code (an Atropos checkout's
    ``environments/`` beside this layer's), the installed modules keep their one identity."""
    root = root.resolve()

    def forget() -> None:
        for name, module in list(sys.modules.items()):
            if name != top and not name.startswith(top + "."):
                continue
            where = getattr(module, "__file__", None)
            if where and Path(where).resolve().is_relative_to(root):
                FORGOTTEN_FILES.add(str(Path(where).resolve()))
                del sys.modules[name]

    forget()
    try:
        yield
    finally:
        forget()


def run_env_file(env_file: Path, argv: Sequence[str],
                 module: tuple[str, Path] | None = None, rerun: str | None = None) -> int:
    """Run ``env_file`` as ``__main__`` with ``argv``; return its exit code.

    ``SystemExit`` (the env CLI ends with one) becomes the code. Errors of hermes-replay itself
    (a cassette miss, a bad cassette) propagate so the caller can report them with context;
    any other crash of the environment is printed with its traceback and returns 1, naming
    ``rerun`` (the command to debug it with; by default the env's own CLI, which reaches the
    endpoint in its flags: a replay passes an offline one instead).
    """
    from hermes_replay import HermesReplayError

    module = module or module_of(env_file)
    with _as_script(env_file, argv, module[1] if module else None), \
            (_fresh_package(module[0].split(".")[0], module[1]) if module else nullcontext()):
        try:
            if module is not None:  # relative imports: run it as `python -m pkg.env` would
                runpy.run_module(module[0], run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(str(env_file), run_name="__main__")
        except SystemExit as exc:
            code = exc.code
            if code is None:
                return 0
            if isinstance(code, int):
                return code
            print(code, file=sys.stderr)
            return 1
        except HermesReplayError:
            raise
        except Exception as exc:
            # The miss may arrive wrapped by the env (e.g. a retry layer); surface it as such.
            cause = _find_cause(exc, HermesReplayError)
            if cause is not None:
                raise cause from exc
            traceback.print_exc()
            how = f"-m {module[0]}" if module is not None else str(env_file)
            command = rerun or f"python {how} {' '.join(argv)}"
            print(
                f"hermes-replay: {env_file} raised {type(exc).__name__}: {exc}\n"
                f"  (traceback above). Next step: run `{command}` to debug the environment.",
                file=sys.stderr,
            )
            return 1
    return 0


def _find_cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, kind):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


class OutcomeCollector:
    """Keeps what each finished rollout reported, and feeds progress (a session observer,
    see ``Session.observe``): per-rollout rewards in every mode, passthrough included."""

    def __init__(self, on_rollout: Any = None) -> None:
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}  # plain envs (``_runner.plain_groups``)
        self.annotations: dict[str, Any] = {}
        self._on_rollout = on_rollout

    def rollout_finished(self, scope: Any) -> None:
        if scope.outcome.get("kind") == "group":  # a plain env's group: its scores, no reward
            self.groups[scope.id] = dict(scope.outcome)
            return
        self.outcomes[scope.id] = dict(scope.outcome)
        if self._on_rollout is not None:
            self._on_rollout(scope.id, self.outcomes[scope.id])

    def annotate(self, fields: dict[str, Any]) -> None:
        self.annotations.update(fields)

    @property
    def rewards(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for rid, outcome in self.outcomes.items():
            reward = outcome.get("reward")
            out[rid] = float(reward) if isinstance(reward, (int, float)) else None
        return out

    @property
    def turns(self) -> int:
        return sum(int(o.get("turns_used") or 0) for o in self.outcomes.values())


class _Sink(io.TextIOBase):
    """Where an env's stdout/stderr go during a quiet run. Retargeted per run and never
    closed, so logging handlers an env created during an earlier run keep working. Written
    from two threads (the env's, and the reader of its captured fds), hence the lock."""

    def __init__(self) -> None:
        super().__init__()
        self.target: Any = None
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            (self.target or sys.__stderr__).write(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self.target is not None:
                self.target.flush()


_SINK = _Sink()


class _ToCurrentStderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time of the record: the env log during a
    quiet run, the terminal with ``-v``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging must never break a run
            self.handleError(record)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextmanager
def library_output_with_env() -> Iterator[None]:
    """Library log records (INFO and up) and warnings go where the env's own output goes, so a
    quiet run stays quiet (atroposlib's config dump and UserWarnings land in the env log, not
    on the terminal or in pytest's warning summary) and a failed run's log tail has them."""
    handler = _ToCurrentStderr(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            yield
    finally:
        root.removeHandler(handler)


@contextmanager
def redirected_to(log_path: Path | None) -> Iterator[None]:
    """The env's stdout/stderr into ``log_path`` for the block (None: left where they are):
    Python's streams, and file descriptors 1 and 2 too (``os.write``, ``os.system``, child
    processes; scrubbed on their way, see ``fd_capture``)."""
    if log_path is None:
        yield
        return
    from hermes_replay._runner.fd_capture import captured_fds

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as fh:
        _SINK.target = fh
        try:
            with captured_fds(_SINK.write), redirect_stdout(_SINK), redirect_stderr(_SINK):
                yield
        finally:
            _SINK.target = None


@contextmanager
def shown_on(out: Any, err: Any) -> Iterator[None]:
    """The env's stdout/stderr on ``out``/``err`` for the block (``-v``): Python's streams,
    and what it writes below Python (fds 1 and 2: ``os.system``, child processes) on the
    terminal — scrubbed, since a key an env echoes must not reach a terminal or a CI log."""
    from hermes_replay._runner.fd_capture import captured_fds, terminal_stream

    terminal = terminal_stream(sys.stderr)

    def shown(text: str) -> None:
        terminal.write(text)
        terminal.flush()

    try:
        with captured_fds(shown), redirect_stdout(out), redirect_stderr(err):
            yield
    finally:
        out.flush()  # a last line without its newline
        err.flush()
