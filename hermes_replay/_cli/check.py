"""``hermes-replay check ENV_FILE`` — the seed's pitfalls and testing checklist, automated.

Exit codes: 0 nothing failed (warnings allowed); 1 at least one check failed; 2 usage (argparse,
or a file that does not exist).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hermes_replay._cli._runner import ENV_HELP

HELP = "check an environment file for the seed's pitfalls (static) and run its test checklist"
DESCRIPTION = (
    "Static rules read the environment's source (nothing is imported or run) and report each "
    "pitfall with file:line and the fix. Dynamic checks then import the file, run `process` "
    "with one item and `evaluate`, and check tokens, masks, metrics and rewards — offline from "
    "a cassette (--cassette) or live against an endpoint you name (--endpoint, --model). "
    "With neither, the env's own cassettes are replayed (cassettes/<env>/, as `watch` finds "
    "them). A plain atroposlib env gets the rules that hold for any env: rewards are judged by "
    "what a trainer needs (finite; a group not all alike), not by [0, 1]. "
    "Live, the env's flags go after -- as for `record`; offline, each mode runs as `replay` "
    "runs it. Exit 1 on any failure; warnings never fail."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("check", help=HELP, description=DESCRIPTION)
    p.add_argument("env_file", metavar="ENV_FILE", help=ENV_HELP)
    p.add_argument("--json", action="store_true",
                   help="print a JSON list of {rule, status, file, line, message, fix} for CI")
    p.add_argument("--static-only", action="store_true",
                   help="run only the static rules (import and run nothing)")
    p.add_argument("--cassette", type=Path, metavar="PATH",
                   help="offline: a recorded cassette, or a folder of them (e.g. "
                   "cassettes/my_env/ with process.jsonl and evaluate.jsonl), to replay")
    p.add_argument("--endpoint", metavar="URL",
                   help="run the process/evaluate checks live against this base URL")
    p.add_argument("--model", metavar="M", help="model name at --endpoint")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="with --endpoint: NAME of the environment variable holding the API key")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="keep the runs' outputs (and, live, the recorded cassettes) in DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._check import (
        Target,
        check_env,
        is_plain_env,
        overall_exit_code,
        render_json,
        render_table,
    )
    from hermes_replay._check._argv import env_flags_problem
    from hermes_replay._runner.env_target import module_as_file

    path = Path(module_as_file(args.env_file))
    if not path.is_file():
        print(f"hermes-replay check: {path} is not a file; pass the environment's .py file "
              "(e.g. environments/my_env.py)", file=sys.stderr)
        return 2
    if bool(args.endpoint) != bool(args.model):
        print("hermes-replay check: --endpoint and --model go together (the endpoint's base URL "
              "and the model name to ask it for)", file=sys.stderr)
        return 2
    if args.cassette is not None and args.endpoint:
        print("hermes-replay check: give --cassette (offline replay) or --endpoint/--model "
              "(live), not both", file=sys.stderr)
        return 2
    if args.cassette is not None and not args.cassette.exists():
        print(f"hermes-replay check: cassette {args.cassette} does not exist; record one with "
              "`hermes-replay record` or leave --cassette out", file=sys.stderr)
        return 2
    env_flags = list(getattr(args, "env_args", None) or [])
    if (problem := env_flags_problem(env_flags, live=bool(args.endpoint))) is not None:
        print(f"hermes-replay check: {problem}", file=sys.stderr)
        return 2
    cassette = args.cassette
    if cassette is None and not args.endpoint and not args.static_only:
        from hermes_replay._corpus.watch_plan import own_cassettes

        cassette = own_cassettes(path)
        if cassette is not None:
            print(f"hermes-replay check: replaying {cassette} (the env's own cassettes; "
                  "--cassette PATH names others)", file=sys.stderr)
    target = Target(cassette=cassette, endpoint=args.endpoint, model=args.model,
                    api_key_env=args.api_key_env, env_flags=tuple(env_flags))
    rows = check_env(path, target=target, dynamic=not args.static_only, display=str(path),
                     keep=args.out)
    print(render_json(rows, str(path)) if args.json else render_table(rows, str(path)))
    if not args.json and is_plain_env(path):
        print("  (a plain atroposlib env: the Hermes layer's rules are not applied, and "
              "rewards are judged by what any trainer needs — finite, not all alike in a "
              "group — not by [0, 1])")
    return overall_exit_code(rows)
