"""What the CLI's run commands share: the ``-- MODE [env flags]`` argv, usage checks, the
flags of matching and tool policy, and ``run_with_progress`` — the library's one runner
(``hermes_replay._runner.run``) with a progress line. The work itself is never done here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_replay._cassette.files import relative_to_cwd  # re-exported: the CLI's one import point
from hermes_replay._corpus.job import ENV_MODES
from hermes_replay._corpus.summary import RunSummary, summarize
from hermes_replay._errors import HermesReplayError
from hermes_replay._runner.envrun import redirected_to, shown_on
from hermes_replay._runner.fd_capture import terminal_stream
from hermes_replay._runner.log_folder import LogFolderError, default_log_folder, env_log_path
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

# ENV_FILE, as the commands that run an environment take it
ENV_HELP = ("the environment file (a CLI), or its module as python -m takes it "
            "(-m environments.community.x.y, run from the repository root)")
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
    """``--normalize NAME`` (a built-in) or ``REGEX=REPLACEMENT`` (``normalizers.parse_cli``),
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


def redact_command(argv: Sequence[str]) -> list[str]:
    """The env argv with credential flag values, URL passwords and keys replaced, for
    headers and printed commands (the shared rules of ``_redact.redact_argv``)."""
    from hermes_replay._secrets.redact import redact_argv

    return redact_argv(argv)


def quiet(log_path: Path | None, progress: Progress) -> Any:
    """Send the env's own output to ``log_path``; None shows it on the terminal (printed
    above a live progress bar, so the two do not run into each other; scrubbed)."""
    if log_path is not None:
        return redirected_to(log_path)
    return shown_on(progress.above(sys.stdout), progress.above(sys.stderr))


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
    """Call ``run`` (``run_env`` with its arguments bound) with a progress line and the env's
    output quieted into ``log_path``; the run is judged where every run is
    (``_corpus.summary.summarize``) and its message printed once."""
    err = sys.stderr if err is None else err
    # the env's fds 1/2 go to its log during the run (``fd_capture``); the progress line
    # must still reach the terminal
    progress = Progress(terminal_stream(err), label=label)
    result: RunResult | None = None
    stopped: BaseException | None = None
    progress.start()
    try:
        result = run(output=quiet(log_path, progress), on_rollout=progress.rollout_done,
                     on_event=progress.event, raise_errors=False)
    except (KeyboardInterrupt, HermesReplayError) as exc:  # Ctrl-C; a bad cassette
        stopped = exc
    finally:
        progress.close()
    summary, message = summarize(mode, cassette, result, stopped, log=log_path,
                                 verbose=verbose, normalizers=normalizers)
    if message:
        print(message, file=err)
    return summary, result if stopped is None else None
