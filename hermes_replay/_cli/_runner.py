"""Run an environment file's own CLI in this process, as ``python ENV_FILE ARGS…`` would.

In-process (``runpy``), not a subprocess, because the cassette's interception lives in this
interpreter: the env's openai/httpx/aiohttp clients are patched only here.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hermes_replay._cli._render import LineClearingStream, Progress, RunSummary
from hermes_replay._envrun import OutcomeCollector, run_env_file

__all__ = [
    "ENV_MODES",
    "OutcomeCollector",
    "add_env_command",
    "check_env_args",
    "default_cassette_path",
    "redact_command",
    "relative_to_cwd",
    "run_env_file",
    "run_with_cassette",
]

ENV_MODES = ("serve", "process", "evaluate")
REDACTED = "<redacted>"


class _EnvArgsParser(argparse.ArgumentParser):
    """Puts everything after the first ``--`` into ``env_args`` untouched.

    argparse cannot do this itself: a ``nargs="*"`` positional after ENV_FILE is consumed
    (empty) together with it, and the env's own ``--env.*`` flags would be rejected.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        items = list(sys.argv[1:] if args is None else args)
        tail: list[str] | None = None
        if "--" in items:
            i = items.index("--")
            items, tail = items[:i], items[i + 1 :]
        ns, extras = super().parse_known_args(items, namespace)
        ns.env_args = tail
        return ns, extras


def add_env_command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A sub-command parser whose ``args.env_args`` is the argv after ``--`` (None if no ``--``)."""
    parser = sub.add_parser(name, **kwargs)
    parser.__class__ = _EnvArgsParser  # same state, only parse_known_args differs
    return parser


def check_env_args(prog: str, env_file: str, env_args: Sequence[str] | None) -> str | None:
    """Why ``env_args`` cannot be run (a usage message), or None when it is fine."""
    example = f"hermes-replay {prog} {env_file} -- process --env.total_steps 2 --env.group_size 4"
    if not env_args:
        return (
            f"hermes-replay {prog}: say which mode of {env_file} to run after `--` "
            f"(serve, process or evaluate). Example:\n  {example}"
        )
    if env_args[0] not in ENV_MODES:
        return (
            f"hermes-replay {prog}: {env_args[0]!r} is not a mode of the environment CLI; the "
            f"first word after `--` must be serve, process or evaluate. Example:\n  {example}"
        )
    return None


def relative_to_cwd(path: Path) -> str:
    """``path`` relative to the working directory, POSIX style (stable across machines)."""
    try:
        return Path(os.path.relpath(path.resolve(), Path.cwd())).as_posix()
    except ValueError:  # another drive on Windows
        return path.resolve().as_posix()


def default_cassette_path(env_file: Path, env_mode: str) -> Path:
    """``cassettes/<env file stem>/<mode>.jsonl``."""
    return Path("cassettes") / env_file.stem / f"{env_mode}.jsonl"


def redact_command(argv: Sequence[str]) -> list[str]:
    """The env argv with credential flag values, URL passwords and keys replaced, for
    headers and printed commands (the shared rules of ``_redact.redact_argv``)."""
    from hermes_replay._redact import redact_argv

    return redact_argv(argv)


class _Sink(io.TextIOBase):
    """Where an env's stdout/stderr go during a quiet run. Retargeted per run and never
    closed, so logging handlers an env created during an earlier run keep working."""

    def __init__(self) -> None:
        super().__init__()
        self.target: Any = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        (self.target or sys.__stderr__).write(text)
        return len(text)

    def flush(self) -> None:
        if self.target is not None:
            self.target.flush()


_SINK = _Sink()


@contextmanager
def _quiet(log_path: Path | None, progress: Progress | None = None) -> Iterator[None]:
    """Send the env's own output to ``log_path``; None leaves it on the terminal (where it
    first wipes a live progress line, so the two do not run into each other)."""
    if log_path is None:
        if progress is None or not progress.tty:
            yield
            return
        out = LineClearingStream(sys.stdout, progress)
        err = LineClearingStream(sys.stderr, progress)
        with redirect_stdout(out), redirect_stderr(err):
            yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as fh:
        _SINK.target = fh
        try:
            with redirect_stdout(_SINK), redirect_stderr(_SINK):
                yield
        finally:
            _SINK.target = None


class _EnvFailed(Exception):
    """Internal: a recording must not replace the cassette (env failed, or nothing recorded)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextmanager
def _env_default(name: str, value: str | None) -> Iterator[None]:
    """Set an environment variable unless the user set it; undo afterwards."""
    if value is None or name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


def run_with_cassette(
    *,
    mode: str,
    env_file: Path,
    argv: Sequence[str],
    cassette_path: Path | None,
    options: dict[str, Any],
    label: str,
    err: Any = None,
    log_path: Path | None = None,
    allow_network: bool = False,
    max_misses: int | None = None,
) -> tuple[RunSummary, OutcomeCollector]:
    """Run the env CLI inside ``hermes_replay.cassette(...)`` with progress; never raises
    hermes-replay errors (they end up in the summary's ``error``, already printed)."""
    import hermes_replay
    from hermes_replay import CassetteMiss, HermesReplayError

    err = sys.stderr if err is None else err
    progress = Progress(err, label=label)
    collector = OutcomeCollector(on_rollout=progress.rollout_done)
    summary = RunSummary(mode=mode, cassette=str(cassette_path) if cassette_path else None,
                         log=str(log_path) if log_path else None)
    session = None
    code = 0
    try:
        # Replay is offline: keep wandb from trying the network (the user's setting wins).
        with _env_default("WANDB_MODE", "disabled" if mode == "replay" else None):
            with collector.listening():
                # passthrough reads and writes nothing, but the session still wants a path
                path = cassette_path if cassette_path is not None else Path("(passthrough)")
                events = _event_option(progress)
                with hermes_replay.cassette(path, mode=mode, **events, **options) as session:
                    if not events:
                        progress.miss_count = lambda: _count(session, "misses")
                    progress.start()
                    with _quiet(log_path, progress), _scrubbed(mode, argv), \
                            _bounded(mode, session, allow_network, max_misses):
                        code = run_env_file(env_file, argv)
                    if mode == "record":
                        # Leaving the block by an exception makes the core keep the old
                        # cassette and leave the completed interactions in <path>.partial.
                        _check_recording(code, session)
    except _EnvFailed as exc:
        progress.close()
        summary.error = (
            f"{exc.reason}; the previous cassette (if any) was left as it was, completed "
            f"interactions are in {cassette_path}.partial"
        )
    except CassetteMiss as exc:
        progress.close()
        print(f"hermes-replay {mode}: {exc}", file=err)
        summary.error = (
            f"{len(exc.unused)} recordings never used (strict)"
            if hasattr(exc, "unused")
            else f"{len(exc.misses)} requests had no recording"
        )
    except HermesReplayError as exc:
        progress.close()
        print(f"hermes-replay {mode}: {exc}", file=err)
        summary.error = str(exc).splitlines()[0]
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (see _signals)
        from hermes_replay._signals import describe, exit_code

        progress.close()
        kept = (f"; the previous cassette was kept, completed interactions are in "
                f"{cassette_path}.partial" if mode == "record" else "")
        print(f"\nhermes-replay {mode}: {describe(exc)}; nothing was overwritten{kept}.",
              file=err)
        summary.error = describe(exc)
        code = exit_code(exc)
    finally:
        progress.close()
    summary.exit_code = code
    _fill_summary(summary, session, collector)
    return summary, collector


def _scrubbed(mode: str, argv: Sequence[str]) -> Any:
    """Live runs print and write with real keys around: scrub both (see _scrub_outputs)."""
    from contextlib import nullcontext

    from hermes_replay._scrub_outputs import scrubbed_run

    return nullcontext() if mode == "replay" else scrubbed_run(argv)


def _bounded(mode: str, session: Any, allow_network: bool, max_misses: int | None) -> Any:
    """Replay: offline (loopback only) and stopped when it makes no progress (_offline)."""
    from contextlib import nullcontext

    from hermes_replay._offline import DEFAULT_MAX_MISSES, offline_replay

    if mode != "replay":
        return nullcontext()
    return offline_replay(session, allow_network=allow_network,
                          max_misses=DEFAULT_MAX_MISSES if max_misses is None else max_misses)


def _check_recording(code: int, session: Any) -> None:
    """Refuse to replace a cassette with a failed or empty recording."""
    if getattr(session, "write_error", None) is not None:
        raise session.write_error  # disk full: say so, not "check the endpoint"
    if code != 0:
        raise _EnvFailed(f"the environment exited with code {code}")
    core = session.summary()
    if int(getattr(core, "recorded", 1) or 0) == 0:
        failed = int(getattr(core, "failed_attempts", 0) or 0)
        why = f" ({failed} attempts failed)" if failed else ""
        raise _EnvFailed(
            f"no LLM request was recorded{why} — check the endpoint URL, model name and key"
        )


def _event_option(progress: Progress) -> dict[str, Any]:
    """``on_event=`` if this core accepts it (progress then also hears about misses)."""
    import inspect

    import hermes_replay

    try:
        params = inspect.signature(hermes_replay.cassette).parameters
    except (TypeError, ValueError):
        return {}
    if "on_event" in params:
        return {"on_event": progress.event}
    return {}


def _count(session: Any, name: str) -> int:
    try:
        value = getattr(session.summary(), name)
    except Exception:  # progress must never break the run
        return 0
    return len(value) if isinstance(value, (list, tuple)) else int(value or 0)


def _fill_summary(summary: RunSummary, session: Any, collector: OutcomeCollector) -> None:
    """Numbers from the session's own summary where it has them, else from the collector."""
    core = None
    if session is not None:
        try:
            core = session.summary()
        except Exception:
            core = None
    rewards = [r for r in collector.rewards.values() if r is not None]
    summary.rollouts = len(collector.outcomes)
    summary.turns = collector.turns
    summary.mean_reward = sum(rewards) / len(rewards) if rewards else None
    if core is None:
        return
    summary.rollouts = max(summary.rollouts, int(getattr(core, "rollouts", 0) or 0))
    summary.turns = int(getattr(core, "turns", 0) or 0) or summary.turns
    summary.misses = _count(session, "misses")
    summary.unused = _count(session, "unused")
    unused = getattr(core, "unused", None)
    if isinstance(unused, (list, tuple)):
        summary.unused_keys = [
            f"{key[0] or '<no rollout>'}#{key[1]}" if isinstance(key, tuple) else str(key)
            for key in unused
        ]
    summary.recorded = _count(session, "recorded")
    summary.failed_attempts = _count(session, "failed_attempts")
    if summary.mean_reward is None:
        summary.mean_reward = getattr(core, "mean_reward", None)
