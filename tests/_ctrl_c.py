"""What SIGINT does in the children a test starts: they inherit it through exec.

A suite started as a background job (``pytest … &`` in a script, some CI runners) runs with
SIGINT ignored, and so did every child: a test's SIGINT to its ``hermes-replay`` subprocess
then did nothing, and the test failed on how the suite was started. ``ctrl_c_reaches_children``
gives the children the default disposition, as under a terminal; ``ctrl_c_ignored_in_children``
starts them as a background job does. Both set the disposition in this process for the block
only (no ``preexec_fn``, which is unsafe in a process with threads, as an xdist worker is).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def _sigint(disposition: Any) -> Iterator[None]:
    found = signal.signal(signal.SIGINT, disposition)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, found)


def ctrl_c_reaches_children() -> Any:
    """Children started in the block get SIGINT at its default (Python's handler here)."""
    return _sigint(signal.default_int_handler)


def ctrl_c_ignored_in_children() -> Any:
    """Children started in the block have SIGINT ignored, as a background job's have."""
    return _sigint(signal.SIG_IGN)
