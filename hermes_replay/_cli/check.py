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
    "Live, the env's own flags go after -- as for `record` (e.g. -- --env.tokenizer_name "
    "DIR); offline, each mode runs where and as `replay` runs it (the recorded working "
    "folder and command). Exit 1 on any failure; warnings never fail."
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
    if env_flags and not args.endpoint:
        print("hermes-replay check: flags after -- go to the env's live runs (with --endpoint "
              "and --model); offline, check replays the recorded command as `replay` does",
              file=sys.stderr)
        return 2
    if env_flags and env_flags[0] in ("serve", "process", "evaluate"):
        print(f"hermes-replay check: give only the env's flags after -- (check runs both "
              f"process and evaluate itself), e.g. -- {' '.join(env_flags[1:]) or '--env.X V'}",
              file=sys.stderr)
        return 2
    cassette = args.cassette
    if cassette is None and not args.endpoint and not args.static_only:
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


def own_cassettes(env_file: Path) -> Path | None:
    """The env's cassettes, found as ``watch`` finds them: ``cassettes/<env stem>/`` where
    ``record`` puts them (from here, or the project root), else the folder of any cassette
    under the project's ``cassettes/`` whose header names this env file."""
    from hermes_replay._corpus.watch_plan import env_file_of, project_root
    from hermes_replay._runner.plan import find_cassettes

    root = project_root(env_file.resolve())
    for base in (Path("cassettes"), root / "cassettes"):
        folder = base / env_file.stem
        if folder.is_dir() and find_cassettes(folder):
            return folder
    if (root / "cassettes").is_dir():
        for candidate in find_cassettes(root / "cassettes"):
            if env_file_of(candidate) == env_file.resolve():
                return candidate.parent
    return None
