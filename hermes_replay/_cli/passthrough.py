"""``hermes-replay passthrough ENV_FILE [endpoint flags] -- MODE [env flags]``.

A real run (serve/process/evaluate) under the harness with nothing recorded and nothing blocked:
the same code path as replay, so what a cassette test exercises is what production runs. The
endpoint is settled exactly as for ``record`` (never assumed).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

from hermes_replay._cli._provider import SERVER_TYPES
from hermes_replay._cli._runner import (
    ENV_HELP,
    add_env_command,
    add_verbose_flag,
    env_log_path,
    run_with_progress,
)
from hermes_replay._cli.record import prepare_live_run
from hermes_replay._terminal.render import Style


def register(sub: Any) -> None:
    p = add_env_command(
        sub,
        "passthrough",
        help="run an environment live under the harness; nothing is recorded or blocked",
        usage=(
            "hermes-replay passthrough ENV_FILE [--endpoint URL --model NAME ...] [-v] "
            "-- serve|process|evaluate [env flags]"
        ),
        description=(
            "Run ENV_FILE's CLI live with the harness active but writing nothing — for real "
            "serve/process runs through the same code path that replay tests exercise."
        ),
    )
    p.add_argument("env_file", metavar="ENV_FILE", help=ENV_HELP)
    g = p.add_argument_group("endpoint (never assumed)")
    g.add_argument("--endpoint", metavar="URL")
    g.add_argument("--model", metavar="NAME")
    g.add_argument("--server-type", choices=SERVER_TYPES)
    g.add_argument("--api-key-env", metavar="VAR")
    add_verbose_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    prepared = prepare_live_run("passthrough", args)
    if isinstance(prepared, int):
        return prepared
    env_args, endpoint, secret = prepared
    from hermes_replay._runner.env_target import resolve_env
    from hermes_replay._runner.run import run_env

    env_file, module = resolve_env("passthrough", args.env_file)  # type: ignore[misc]

    log = None if args.verbose else env_log_path("passthrough", env_file, env_args[0])
    if log is not None:
        print(f"hermes-replay passthrough: environment output: {log} (-v shows it here)",
              file=sys.stderr)
    summary, _ = run_with_progress(
        partial(run_env, env_file, [*env_args, *endpoint.env_flags(), *secret], cassette=None,
                mode="passthrough", module=module),
        mode="passthrough", cassette=None, label=f"running {env_file.name}", log_path=log,
        verbose=args.verbose)
    print("\n".join(summary.lines(Style(sys.stdout))))
    if summary.error and not summary.exit_code:
        return 1
    return summary.exit_code
