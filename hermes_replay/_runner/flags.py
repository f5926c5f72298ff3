"""A misspelt environment flag fails before anything runs, with a "did you mean".

Why: atroposlib's CLI (pydantic-cli over argparse) takes a flag that is the start of a real
one as that flag (argparse's abbreviations), then reads the ``--env.*`` / ``--openai.*``
values from the flags it finds in ``sys.argv`` *by name*. ``--env.total_step 2`` therefore
parses, matches no field, and the run goes on with the default — a recording of 1,000 steps
instead of 2, against a paid endpoint. Other flags argparse rejects, but with no suggestion,
after the env file has been imported.

So every run hermes-replay makes (record, passthrough, replay) checks the flags first: when
the environment's CLI starts, before atroposlib parses anything, each ``--flag`` must be one
of the mode's options exactly (every namespace alike: ``--env.*``, ``--openai.*``,
``--slurm``, ``--testing`` …). The options come from the same pydantic models atroposlib
builds its parser from, so the check knows exactly the flags it accepts.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hermes_replay._errors import UnknownFlags

__all__ = ["checked_flags", "unknown_flags"]

MODES = ("serve", "process", "evaluate")


def _options(env_cls: Any, mode: str) -> set[str]:
    """Every option string atroposlib's parser accepts for ``mode`` of ``env_cls``."""
    from pydantic_cli import pydantic_class_to_parser

    config_cls = getattr(env_cls, f"get_cli_{mode}_config_cls")()
    parser = pydantic_class_to_parser(config_cls, default_value_override={})
    return set(parser._option_string_actions)  # argparse's table of option strings


def unknown_flags(argv: Sequence[str], options: set[str]) -> list[tuple[str, list[str]]]:
    """``[(flag, close matches)]`` for each ``--flag`` of ``argv`` that is not an option."""
    longs = sorted(o for o in options if o.startswith("--"))
    found = []
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        flag = token.split("=", 1)[0]
        if flag in options:
            continue
        # an abbreviation first (what argparse would silently have taken), then look-alikes
        prefixed = [o for o in longs if o.startswith(flag)]
        found.append((flag, prefixed[:3] or difflib.get_close_matches(flag, longs, n=2,
                                                                       cutoff=0.75)))
    return found


def _check(env_cls: Any, argv: Sequence[str]) -> None:
    if not argv or argv[0] not in MODES:
        return  # no mode, or --help: atroposlib's own usage message says what to do
    problems = unknown_flags(argv[1:], _options(env_cls, argv[0]))
    if problems:
        raise UnknownFlags(env_cls.__name__, argv[0], problems)


@contextmanager
def checked_flags() -> Iterator[None]:
    """Inside the block, an atroposlib environment's ``cli()`` checks ``sys.argv`` first."""
    from atroposlib.envs.base import BaseEnv

    original = BaseEnv.__dict__["cli"]

    def cli(cls: Any) -> Any:
        _check(cls, sys.argv[1:])
        return original.__func__(cls)

    BaseEnv.cli = classmethod(cli)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        BaseEnv.cli = original  # type: ignore[method-assign]
