"""Children a test interrupts as a user's Ctrl-C would must be able to receive SIGINT.

A suite started as a background job (``pytest … &`` in a script, some CI runners) runs with
SIGINT ignored, and children inherit an ignored signal through exec: a test's SIGINT to its
``hermes-replay`` subprocess then did nothing, and the test failed on how the suite was
started. Inside this block the test process handles SIGINT (Python's own handler), so a child
started here gets the default disposition, as under a terminal.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def ctrl_c_reaches_children() -> Iterator[None]:
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, found)
