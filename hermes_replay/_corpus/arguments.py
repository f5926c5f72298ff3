"""The arguments of ``replay_corpus`` checked before anything runs (trust round 5, finding 09).

``replay_corpus`` is public: a notebook or a CI script calls it with whatever it has. A value
of the wrong shape must be refused up front, naming the argument and what it takes — not an
``AttributeError`` deep in the run (``shard=3``, ``observer=1``), an ``OSError`` at the end
(``out=`` a file), a string taken as true (``report="no"``) or a bare ``AssertionError``
(``rescore=-1`` with ``live=…``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hermes_replay._cassette.files import not_a_folder
from hermes_replay._corpus.errors import CorpusError
from hermes_replay._corpus.shard import Shard, ShardError, parse_shard

__all__ = ["CorpusArgumentError", "check_observer", "check_out", "check_rescore", "check_shard",
           "check_switches"]

_WHERE = "replay_corpus()"


class CorpusArgumentError(CorpusError, ValueError):
    """An argument of ``replay_corpus`` of the wrong shape or value: the message names it and
    what it takes. A ``CorpusError`` (the command line exits 2) and a ``ValueError`` (what a
    wrong argument raised before, so callers catching that still do)."""


def check_switches(**values: Any) -> None:
    """Each of ``values`` (``fail_on_change``, ``report``, ``verbose``, ``ray_upload``) is a
    bool: ``"no"`` is a non-empty string, and would count as true."""
    for name, value in values.items():
        if not isinstance(value, bool):
            raise CorpusArgumentError(f"{_WHERE}: {name} must be True or False, not "
                                      f"{value!r:.60} (a string such as 'no' would count as "
                                      "true)")


def check_shard(shard: Any) -> Shard | None:
    """``shard`` as a ``Shard``: None, a ``Shard`` or ``"I/N"``; anything else refused."""
    if shard is None:
        return None
    if not isinstance(shard, (str, Shard)):
        raise CorpusArgumentError(f"{_WHERE}: shard={shard!r:.60}: give \"I/N\" (a string "
                                  "such as \"2/8\": the 2nd of 8 parts), a Shard, or None")
    try:
        return parse_shard(str(shard))  # a Shard built by hand is held to the same rule
    except ShardError as exc:
        raise CorpusArgumentError(f"{_WHERE}: shard={shard!r:.60}: {exc}") from None


def check_rescore(rescore: Any, live: Any) -> None:
    """``rescore``: None, or K ≥ 1 replays per cassette, and only with ``live=…``."""
    if rescore is None:
        return
    if isinstance(rescore, bool) or not isinstance(rescore, int) or rescore < 1:
        raise CorpusArgumentError(f"{_WHERE}: rescore={rescore!r:.60}: give a whole number of "
                                  "1 or more (replays per cassette with the live judge), or "
                                  "None")
    if live is None:
        raise CorpusArgumentError(f"{_WHERE}: rescore={rescore} goes with live=… (which calls "
                                  "to send live); without it every replay is the same")


def check_observer(observer: Any, base: type) -> None:
    if observer is not None and not isinstance(observer, base):
        raise CorpusArgumentError(f"{_WHERE}: observer={observer!r:.60}: give an instance of "
                                  "a CorpusObserver subclass (hermes_replay.CorpusObserver), "
                                  "or None")


def check_out(out: Any) -> None:
    """``out`` names a folder that is there or can be made: not a file, nor below one."""
    if out is None:
        return
    if not isinstance(out, (str, os.PathLike)) or not str(out):
        raise CorpusArgumentError(f"{_WHERE}: out={out!r:.60}: give a folder's path (a str or "
                                  "a Path), or None for a new ./replay-out/<time>/")
    why = not_a_folder(Path(out))
    if why:
        raise CorpusArgumentError(
            f"the output folder {out} cannot be used: {why}. Next step: pass another --out "
            "(out=…): a new folder or an existing one")
