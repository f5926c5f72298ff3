"""What the CLI's run commands share: the ``-- MODE [env flags]`` argv, usage checks, and
``run_with_progress`` — the library's one runner (``hermes_replay._runner.run``) with a progress
line
and a printed summary. The work itself is never done here.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

from hermes_replay._cassette.files import relative_to_cwd  # re-exported: the CLI's one import point
from hermes_replay._cli._run_summary import RunSummary
from hermes_replay._errors import (
    CassetteMiss,
    HermesReplayError,
    RecordingFailed,
    UnusedRecordings,
)
from hermes_replay._runner.envrun import redirected_to
from hermes_replay._runner.fd_capture import terminal_stream
from hermes_replay._runner.result import RunResult
from hermes_replay._terminal.render import Progress

__all__ = [
    "ENV_MODES",
    "EnvArgsParser",
    "LogFolderError",
    "add_env_command",
    "add_matching_options",
    "add_verbose_flag",
    "check_env_args",
    "default_cassette_path",
    "default_log_folder",
    "env_log_path",
    "matching_options",
    "redact_command",
    "relative_to_cwd",
    "run_with_progress",
]

ENV_MODES = ("serve", "process", "evaluate")
# ENV_FILE, as the commands that run an environment take it
ENV_HELP = ("the environment file (a CLI), or its module as python -m takes it "
            "(-m environments.community.x.y, run from the repository root)")
LOG_DIR_VARIABLE = "HERMES_REPLAY_LOG_DIR"  # where env logs of record/passthrough go
LOG_DAYS = 7  # env logs in the default (temp) folder older than this are removed
REDACTED = "<redacted>"


class EnvArgsParser(argparse.ArgumentParser):
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
    """A sub-command parser whose ``args.env_args`` is the argv after ``--`` (None if no ``--``).

    Every sub-command parser is an ``EnvArgsParser`` (``cli.build_parser`` says so)."""
    parser = sub.add_parser(name, **kwargs)
    assert isinstance(parser, EnvArgsParser), "cli.build_parser sets parser_class"
    return parser


def add_matching_options(parser: argparse.ArgumentParser) -> None:
    """``--ignore-path``/``--normalize``: the matcher's ``ignore_paths``/``normalizers``."""
    g = parser.add_argument_group("matching (for fields that change every run)")
    g.add_argument("--ignore-path", action="append", default=[], metavar="PATH",
                   type=_ignore_path,
                   help="leave a request field out of matching, e.g. body.metadata or "
                   "'body.messages[*].name' (repeatable)")
    add_normalize_flag(g)


def _ignore_path(item: str) -> str:
    """A field path checked here, so a typo is a usage error and not a traceback later."""
    from hermes_replay._cassette.matching import check_ignore_path

    try:
        check_ignore_path(item)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return item


NORMALIZE_HELP = ("a built-in normalizer by name (datetime, uuid, tmp-path, epoch, hex-id) or "
                  "REGEX=REPLACEMENT: rewrite matching text in request bodies before comparing "
                  "(repeatable)")


def add_normalize_flag(parser: Any, help: str = NORMALIZE_HELP) -> None:
    parser.add_argument("--normalize", action="append", default=[],
                        metavar="NAME|REGEX=REPLACEMENT", type=normalizer_arg, help=help)


def normalizer_arg(item: str) -> Any:
    """``--normalize NAME`` (a built-in) or ``REGEX=REPLACEMENT`` (split at the first ``=``),
    checked here so a typo is a usage error before anything runs."""
    from hermes_replay._cassette.normalizers import parse_cli

    try:
        return parse_cli(item)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def matching_options(args: argparse.Namespace) -> dict[str, Any]:
    """The session options of ``add_matching_options`` flags (none given: none passed)."""
    options: dict[str, Any] = {}
    if getattr(args, "ignore_path", None):
        options["ignore_paths"] = list(args.ignore_path)
    if getattr(args, "normalize", None):
        options["normalizers"] = list(args.normalize)
    return options


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


def default_cassette_path(env_file: Path, env_mode: str) -> Path:
    """``cassettes/<env file stem>/<mode>.jsonl``."""
    return Path("cassettes") / env_file.stem / f"{env_mode}.jsonl"


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="show the environment's own output (atroposlib's config dump, its log lines and "
        "warnings) on the terminal instead of writing it to the env log, and every miss's "
        "diff in full")


def env_log_path(prog: str, env_file: Path, env_mode: str) -> Path:
    """A new file for the env's own output of a run with no output folder (``record``,
    ``passthrough``, ``replay ENV_FILE -- MODE``): in ``$HERMES_REPLAY_LOG_DIR`` if set (a
    CI job keeps it as an artifact), else in a private per-user folder under the system's
    temp folder (``default_log_folder``) — never beside the cassette, which is committed.
    Created private (0600) with ``O_EXCL|O_NOFOLLOW``: a live run's output is scrubbed of
    known secrets, but it stays the user's, and a planted link is never written through."""
    from datetime import datetime, timezone

    chosen = os.environ.get(LOG_DIR_VARIABLE, "").strip()
    if chosen:
        folder = Path(chosen)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = default_log_folder()
        _prune_logs(folder)  # a folder the user chose is theirs to keep (a CI artifact, say)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = folder / f"{prog}-{env_file.stem}-{env_mode}-{stamp}-{secrets.token_hex(4)}.log"
        try:
            os.close(os.open(path, flags, 0o600))
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"hermes-replay: could not make a new log file in {folder}")


class LogFolderError(HermesReplayError):
    """The default log folder is not this user's private folder (see ``default_log_folder``)."""


def default_log_folder() -> Path:
    """``<temp>/hermes-replay-logs-<uid>``, made 0700 and checked on every use: a real folder
    (not a link), owned by this user, closed to others. The temp folder is shared; another
    local user could plant the folder first and swap a log for a link, so a root ``record``
    would overwrite the link's target. Anything else found there is refused, naming the way
    out, rather than trusted as found."""
    import stat
    import tempfile

    folder = Path(tempfile.gettempdir()) / f"hermes-replay-logs-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder (a link or a file)"
    elif info.st_uid != os.getuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_mode & 0o077:
        problem = f"is open to other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise LogFolderError(
            f"hermes-replay: the log folder {folder} {problem}, so it is not used. Next step: "
            f"remove it if it is not yours to keep, or set {LOG_DIR_VARIABLE} to a folder of "
            "your own")
    return folder


def _prune_logs(folder: Path) -> None:
    """Remove env logs older than ``LOG_DAYS`` from the default log folder: one file per live
    run would otherwise pile up there forever. Another user's files are left alone."""
    cutoff = time.time() - LOG_DAYS * 86400
    for old in folder.glob("*.log"):
        try:
            if old.is_file() and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:  # not ours to remove, or gone meanwhile
            continue


def redact_command(argv: Sequence[str]) -> list[str]:
    """The env argv with credential flag values, URL passwords and keys replaced, for
    headers and printed commands (the shared rules of ``_redact.redact_argv``)."""
    from hermes_replay._secrets.redact import redact_argv

    return redact_argv(argv)


@contextmanager
def _quiet(log_path: Path | None, progress: Progress) -> Iterator[None]:
    """Send the env's own output to ``log_path``; None leaves it on the terminal (printed
    above a live progress bar, so the two do not run into each other)."""
    if log_path is not None:
        with redirected_to(log_path):
            yield
        return
    from hermes_replay._runner.fd_capture import captured_fds, terminal_stream

    out, err = progress.above(sys.stdout), progress.above(sys.stderr)
    terminal = terminal_stream(sys.stderr)

    def shown(text: str) -> None:  # what the env wrote below Python, scrubbed, on the terminal
        terminal.write(text)
        terminal.flush()

    try:
        # -v shows the env's output, but a key an env echoes (os.system, a child process)
        # must not reach a terminal or a CI log as it is: fds 1 and 2 are scrubbed here too
        with captured_fds(shown), redirect_stdout(out), redirect_stderr(err):
            yield
    finally:
        out.flush()  # a last line without its newline
        err.flush()


def add_tool_policy_args(p: argparse.ArgumentParser) -> None:
    from hermes_replay._session.tools import TOOL_POLICIES

    p.add_argument("--tools", choices=TOOL_POLICIES, default="replay",
                   help="replay (default): answer tool calls from the cassette, execute nothing; "
                   "execute: run them again and report results that drifted")
    p.add_argument("--tool", action="append", default=[], metavar="NAME=POLICY",
                   help="the policy of one tool, e.g. --tool web_search=execute (repeatable)")


def tool_options(args: argparse.Namespace) -> dict[str, Any]:
    """``tools``/``tool_overrides`` (and ``trust_cassette``) for the run; ValueError names a
    bad ``--tool``."""
    from hermes_replay._session.tools import check_policy

    overrides: dict[str, str] = {}
    for item in getattr(args, "tool", None) or []:
        name, sep, policy = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--tool {item!r}: write NAME=replay or NAME=execute")
        overrides[name] = check_policy(policy, f"--tool {name}")
    options: dict[str, Any] = {"tools": getattr(args, "tools", "replay")}
    if overrides:
        options["tool_overrides"] = overrides
    if getattr(args, "trust_cassette", False):
        options["trust_cassette"] = True
    return options


def run_with_progress(
    run: Callable[..., RunResult],
    *,
    mode: str,
    cassette: Path | None,
    label: str,
    log_path: Path | None = None,
    err: Any = None,
    verbose: bool = False,
    normalizers: list[Any] | None = None,
) -> tuple[RunSummary, RunResult | None]:
    """Call ``run`` (``run_env`` or ``run_cassette`` with its arguments bound) with a progress
    line, the env's output quieted into ``log_path``, and its result turned into the summary
    the CLI prints. Errors are printed once and end up in ``summary.error``; misses are shown
    with their diffs (the first few, shortened, unless ``verbose``) and a CLI next step (which
    repeats ``normalizers``, the ones given as flags, in its ``record --missing-only``)."""
    err = sys.stderr if err is None else err
    # the env's fds 1/2 go to its log during the run (``fd_capture``); the progress line
    # must still reach the terminal
    progress = Progress(terminal_stream(err), label=label)
    summary = RunSummary(mode=mode, cassette=str(cassette) if cassette else None,
                         log=str(log_path) if log_path else None)
    result: RunResult | None = None
    progress.start()
    try:
        result = run(output=_quiet(log_path, progress), on_rollout=progress.rollout_done,
                     on_event=progress.event, raise_errors=False)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (see _signals)
        from hermes_replay._runner.signals import describe, exit_code

        progress.close()
        kept = (f"; the previous cassette was kept, completed interactions are in "
                f"{cassette}.partial" if mode == "record" else "")
        print(f"\nhermes-replay {mode}: {describe(exc)}; nothing was overwritten{kept}.",
              file=err)
        summary.error, summary.exit_code = describe(exc), exit_code(exc)
        return summary, None
    except HermesReplayError as exc:  # before the run started (a bad cassette)
        progress.close()
        print(f"hermes-replay {mode}: {exc}", file=err)
        summary.error = str(exc).splitlines()[0]
        return summary, None
    finally:
        progress.close()
    _fill_summary(summary, result)
    error = result.error
    if isinstance(error, RecordingFailed):
        summary.error = str(error)
    elif isinstance(error, UnusedRecordings):
        print(f"hermes-replay {mode}: {error}", file=err)
        summary.error = f"{len(error.unused)} recordings never used (strict)"
    elif isinstance(error, CassetteMiss):
        from hermes_replay._cli._misses import cli_miss_hint, miss_report

        hint = cli_miss_hint(cassette, error.misses, normalizers)
        report = miss_report(error, verbose=verbose, hint=hint)
        print(f"hermes-replay {mode}: {report}", file=err)
        summary.error = f"{len(error.misses)} requests had no recording"
    elif error is not None:
        print(f"hermes-replay {mode}: {error}", file=err)
        summary.error = str(error).splitlines()[0]
    if mode != "replay" and (summary.error or summary.exit_code):
        _print_log_tail(log_path, err)  # (a failed replay's error carries the tail already)
    return summary, result


def _print_log_tail(log_path: Path | None, err: Any) -> None:
    """The end of the env log: what the environment said last (a crash's traceback)."""
    from hermes_replay._runner.verdict import log_tail
    from hermes_replay._terminal.render import sanitize

    tail = log_tail(log_path)
    if tail:
        print(f"last lines of the environment output ({log_path}):", file=err)
        print("\n".join(f"  | {sanitize(line)}" for line in tail), file=err)


def _fill_summary(summary: RunSummary, result: RunResult) -> None:
    """The numbers the CLI prints, from the run's result and its session's own counts."""
    rewards = [r.reward for r in result.rollouts if r.reward is not None]
    summary.exit_code = result.exit_code
    summary.rollouts = len(result.rollouts)
    summary.turns = sum(r.turns or 0 for r in result.rollouts)
    summary.mean_reward = sum(rewards) / len(rewards) if rewards else None
    summary.changed = result.changed_rewards()
    summary.handled = list(result.handled)
    core = result.summary
    if core is None:
        return
    summary.rollouts = max(summary.rollouts, core.rollouts)
    summary.turns = core.turns or summary.turns
    summary.misses = len(core.misses)
    summary.consequences = sum(1 for m in core.misses if m.cause is not None)
    summary.unused = len(core.unused)
    summary.other_workers = core.other_workers
    summary.unused_keys = list(result.unused)
    summary.recorded = core.recorded
    summary.failed_attempts = core.failed_attempts
    summary.rerecorded = dict(core.rerecorded)
    summary.written = dict(core.written) if core.written is not None else None
    summary.tools_replayed = core.tools_replayed
    summary.tools_executed = core.tools_executed
    summary.tool_drift = [d.describe() for d in core.tool_drift]
