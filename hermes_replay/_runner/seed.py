"""The run's seed: chosen when recording, kept in the cassette header, applied again on replay.

Environments shuffle datasets and pick items with Python's ``random`` (and numpy's global
generator), often unseeded in ``setup()``. A recording and its replay must draw the same
numbers, or the replay asks different questions and misses. So before the environment starts,
recording seeds both generators with a seed it chooses (or is given) and writes it to the
header; replay seeds them with the recorded one. A cassette without a seed (recorded before
seeds were kept) is replayed unseeded, as before.

When the seed is applied matters as much as which seed: modules draw from the global generator
when they are first imported (``rich`` does, at ``rich/style.py``), and whether a module is
imported for the first time during a run depends on what the process imported before — the
CLI has imported ``rich`` by then, ``run_cassette`` in a fresh interpreter has not. So the
generators are seeded before the env file runs (for draws its module body makes) and again
right before the environment's own ``setup()`` runs (``seeded_setup``), after every import of
its module; what was imported earlier then changes nothing an environment draws from there on.

Not covered: ``PYTHONHASHSEED`` (fixed when the interpreter starts), other generators
(``torch``, ``np.random.default_rng()`` without a seed), time and the OS.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["run_seed", "seed_globals", "seeded_setup"]


def run_seed(mode: str, given: int | None, recorded: int | None) -> int | None:
    """The seed of a run: ``given`` wins; recording picks one; replay uses the recorded one."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given < 2**32:
            raise ValueError(f"seed must be an integer in [0, 2**32), not {given!r}")
        return given
    if recorded is not None:
        return int(recorded)
    if mode in ("record", "auto"):
        return secrets.randbelow(2**31)
    return None


def seed_globals(seed: int) -> None:
    """Seed ``random`` and, if numpy is installed, numpy's global generator."""
    random.seed(seed)
    np: Any
    try:
        import numpy as np
    except ImportError:  # numpy is optional for hermes_replay itself
        return
    np.random.seed(seed)


@contextmanager
def seeded_setup(seed: int) -> Iterator[None]:
    """Inside the block, every atroposlib environment created seeds ``random`` and numpy with
    ``seed`` right before its ``setup()`` runs (see the module docstring for why then)."""
    from atroposlib.envs.base import BaseEnv

    original = BaseEnv.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        setup = self.setup  # the env's own (bound), found once the instance is complete

        async def seeded() -> Any:
            seed_globals(seed)
            return await setup()

        # an instance attribute: atroposlib's ``await self.setup()`` finds it first
        self.setup = seeded

    BaseEnv.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseEnv.__init__ = original  # type: ignore[method-assign]
