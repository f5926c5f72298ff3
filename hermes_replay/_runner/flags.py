"""A misspelt environment flag fails before anything runs, with a "did you mean".

Why: atroposlib's CLI (pydantic-cli over argparse) takes a flag that is the start of a real
one as that flag (argparse's abbreviations), then reads the ``--env.*`` / ``--openai.*``
values from the flags it finds in ``sys.argv`` *by name*. ``--env.total_step 2`` therefore
parses, matches no field, and the run goes on with the default — a recording of 1,000 steps
instead of 2, against a paid endpoint. Other flags argparse rejects, but with no suggestion,
after the env file has been imported.

So every run hermes-replay makes (record, passthrough, replay) checks the flags first: when
the environment's CLI has built its parser, before atroposlib parses anything, each ``--flag``
must be one of the mode's options exactly (every namespace alike: ``--env.*``, ``--openai.*``,
``--slurm``, ``--testing`` …). The options are read from the very parser atroposlib built
(pydantic-cli's ``_to_subparser``, the one seam between building and ``parse_args``), so the
check knows exactly the flags it accepts and costs nothing: building a second parser from the
same models only to read its option strings was about 16 ms of every run.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hermes_replay._errors import UnknownFlags

__all__ = ["checked_flags", "unknown_flags"]

MODES = ("serve", "process", "evaluate")


def _options(env_cls: Any, mode: str) -> set[str]:
    """Every option string atroposlib's parser accepts for ``mode`` of ``env_cls``, from a
    parser built for the purpose (where pydantic-cli lacks the seam ``checked_flags`` uses)."""
    from pydantic_cli import pydantic_class_to_parser

    config_cls = getattr(env_cls, f"get_cli_{mode}_config_cls")()
    parser = pydantic_class_to_parser(config_cls, default_value_override={})
    return set(parser._option_string_actions)  # argparse's table of option strings


def parser_options(parser: argparse.ArgumentParser, mode: str) -> set[str] | None:
    """The option strings of ``mode``'s subparser of ``parser`` (atroposlib's top parser has
    one per mode); None if it has no such subparser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and mode in action.choices:
            return set(action.choices[mode]._option_string_actions)
    return None


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


def _check(env_cls: Any, argv: Sequence[str], options: set[str] | None = None) -> None:
    if not argv or argv[0] not in MODES:
        return  # no mode, or --help: atroposlib's own usage message says what to do
    if options is None:
        options = _options(env_cls, argv[0])
    problems = unknown_flags(argv[1:], options)
    if problems:
        raise UnknownFlags(env_cls.__name__, argv[0], problems)


@contextmanager
def checked_flags() -> Iterator[None]:
    """Inside the block, an atroposlib environment's ``cli()`` checks ``sys.argv`` before it
    parses: on the parser it built itself, the moment pydantic-cli hands it over."""
    import pydantic_cli
    from atroposlib.envs.base import BaseEnv

    original = BaseEnv.__dict__["cli"]
    build = getattr(pydantic_cli, "_to_subparser", None)
    pending: list[tuple[Any, list[str]]] = []  # (env class, argv) of a cli() not checked yet

    def cli(cls: Any) -> Any:
        argv = sys.argv[1:]
        if build is None:  # a pydantic-cli without the seam: a parser of our own, first
            _check(cls, argv)
            return original.__func__(cls)
        pending.append((cls, argv))
        try:
            return original.__func__(cls)
        finally:
            pending.clear()

    def to_subparser(*args: Any, **kwargs: Any) -> Any:
        parser = build(*args, **kwargs)
        if pending:  # atroposlib's own parser for this cli(): check, then let it parse
            cls, argv = pending.pop()
            options = parser_options(parser, argv[0]) if argv and argv[0] in MODES else None
            _check(cls, argv, options)
        return parser

    BaseEnv.cli = classmethod(cli)  # type: ignore[method-assign,assignment]
    if build is not None:
        pydantic_cli._to_subparser = to_subparser
    try:
        yield
    finally:
        BaseEnv.cli = original  # type: ignore[method-assign]
        if build is not None:
            pydantic_cli._to_subparser = build
