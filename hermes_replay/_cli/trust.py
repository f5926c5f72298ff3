"""``hermes-replay trust [DIR]`` — let cassettes name the environment files of a folder.

A cassette's header names the env file its replay runs; replay looks the name up only in
folders the user trusts (``_runner/trust.py``). This command is the one-time step for a
project that was neither recorded on this machine nor installed into this Python (a fresh
clone, say), like ``direnv allow``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._terminal.render import sanitize


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trust",
        help="let cassettes name the environment files of a project (once per folder)",
        description="Replay runs the env file a cassette's header names only from a folder "
        "you trust: one you recorded in, one installed into this Python (pip install -e), "
        "one listed in $HERMES_REPLAY_TRUST, or one given here. Trust a project once, "
        "the way `direnv allow` does.",
    )
    p.add_argument("folder", metavar="DIR", type=Path, nargs="?", default=Path("."),
                   help="the project's root folder, the one its cassettes' env files are "
                        "relative to (default: the working directory)")
    p.add_argument("--list", action="store_true",
                   help="list the trusted folders and why each is trusted, and change nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._runner.trust import TrustRefused, add_trusted, listing

    if args.list:
        if lines := listing():
            print("\n".join(sanitize(line) for line in lines))
        return 0
    folder: Path = args.folder
    if not folder.is_dir():
        print(sanitize(f"hermes-replay trust: {folder} is not a folder. Next step: give the "
                       "project's root folder (where its pyproject.toml or .git is)."),
              file=sys.stderr)
        return 2
    try:
        trust_file, new = add_trusted(folder)
    except TrustRefused as exc:
        print(sanitize(f"hermes-replay trust: {exc.strerror}"), file=sys.stderr)
        return 2
    except OSError as exc:
        print(sanitize(f"hermes-replay trust: could not write the trust list "
                       f"({exc.strerror or exc}). Next step: set HERMES_REPLAY_TRUST="
                       f"{folder.resolve()} in the environment instead."), file=sys.stderr)
        return 1
    state = "trusted" if new else "already trusted"
    print(sanitize(f"hermes-replay trust: {folder.resolve()} {state} (kept in {trust_file}); "
                   "cassettes replayed from it may run its environment files"))
    return 0
