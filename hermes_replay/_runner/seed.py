"""The run's seed: chosen when recording, kept in the cassette header, applied again on replay.

Environments shuffle datasets and pick items with Python's ``random`` (and numpy's global
generator), often unseeded in ``setup()``. A recording and its replay must draw the same
numbers, or the replay asks different questions and misses. So before the environment starts,
recording seeds both generators with a seed it chooses (or is given) and writes it to the
header; replay seeds them with the recorded one. A cassette without a seed (recorded before
seeds were kept) is replayed unseeded, as before.

Not covered: ``PYTHONHASHSEED`` (fixed when the interpreter starts), other generators
(``torch``, ``np.random.default_rng()`` without a seed), time and the OS.
"""

from __future__ import annotations

import random
import secrets
from typing import Any

__all__ = ["run_seed", "seed_globals"]


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
