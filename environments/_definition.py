"""Where a registered function or class was defined: lets registries tell "this file ran again"
from "two modules want the same name".

The registries (tools, tool-call parsers, sandbox backends) are global to the process and filled
at import. Running one environment file twice in a process — a folder replay, two pytest tests,
``hermes-replay check`` — executes its module body twice and so makes a *new* function or class
from the *same* source. That must be accepted (the newest object then replaces the old one, so
each run uses its own module globals), while a different definition under a taken name is still
refused, with both places named.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["Definition", "definition_of"]


@dataclass(frozen=True)
class Definition:
    """``location``: ``file:line (qualname)`` for messages; ``key``: equal for the same source."""

    location: str
    key: tuple[Any, ...]


def _code(fn: Any) -> Any:
    """The function's code object. Code objects compare equal when name, bytecode, constants,
    names and line table are — not the file name: a copy of an env file run from another
    folder (a test's temporary project) is the same definition; an edited one is not."""
    return getattr(fn, "__code__", None)


def _where(filename: str, line: int, qualname: str) -> str:
    try:
        shown = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        shown = filename
    if shown.startswith(".."):
        shown = filename
    return f"{shown}:{line} ({qualname})"


def definition_of(obj: Any) -> Definition:
    """The definition of a function, a class (by its methods' code) or another callable."""
    qualname = str(getattr(obj, "__qualname__", type(obj).__qualname__))
    if inspect.isclass(obj):
        methods = [(name, _code(inspect.unwrap(value))) for name, value in sorted(vars(obj).items())
                   if callable(value) and _code(inspect.unwrap(value)) is not None]
        bases = tuple(f"{b.__module__}.{b.__qualname__}" for b in obj.__bases__)
        key = (qualname, bases, tuple(methods))
        if methods:  # where its first method is: a class keeps no line of its own before 3.13
            first = min((code for _, code in methods), key=lambda c: c.co_firstlineno)
            return Definition(_where(first.co_filename, first.co_firstlineno, qualname), key)
        return Definition(f"{obj.__module__}.{qualname}", key)
    code = _code(inspect.unwrap(obj) if callable(obj) else obj)
    if code is not None:
        return Definition(_where(code.co_filename, code.co_firstlineno, qualname),
                          (qualname, code))
    # a partial, a callable instance …: only the very same object is the same definition
    return Definition(repr(obj)[:120], ("object", id(obj)))
