"""``ast.parse`` that a garbage-collector finalizer cannot break (CPython before 3.11.8).

In CPython 3.11.7 and older, turning a parsed tree into Python objects keeps its recursion
count in per-interpreter state (gh-106905). Creating those objects can start a garbage
collection, whose finalizers run arbitrary Python — asyncio's "Task exception was never
retrieved" log of a task an env abandoned formats a traceback, and 3.11's traceback
formatting calls ``ast.parse`` itself. The nested parse resets the shared count and the
outer one fails with ``SystemError: AST constructor recursion depth mismatch``: seen in our
suite while the env guard read an env file. With the collector paused for the parse, no
finalizer runs inside it; the pause is as short as one file's parse.
"""

from __future__ import annotations

import ast
import gc

__all__ = ["parse"]


def parse(source: str, filename: str) -> ast.Module:
    """``ast.parse(source, filename)`` with the garbage collector paused (see above)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename)
    finally:
        if was_enabled:
            gc.enable()
