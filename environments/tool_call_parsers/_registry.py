"""Name -> parser class registry, filled by the ``@register_parser`` decorator.

Names are matched case-insensitively. Duplicates are refused so that two modules cannot silently
fight over one name (the last import would otherwise win, depending on import order); the same
class definition registered again (an environment file run twice in one process) is accepted and
the newest class kept.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from environments._definition import definition_of

from ._base import ToolCallParser

_PARSERS: dict[str, type[ToolCallParser]] = {}
#: name (aliases included) → parser class, read-only; the former layer's ``PARSER_REGISTRY``
PARSER_REGISTRY = MappingProxyType(_PARSERS)

ParserClass = type[ToolCallParser]


def _key(name: str) -> str:
    return name.strip().lower()


def register_parser(name: str, *aliases: str) -> Callable[[ParserClass], ParserClass]:
    """Class decorator: register a ``ToolCallParser`` subclass under ``name`` and ``aliases``.

    Raises ``ValueError`` if any of the names is already taken (naming the class holding it) and
    ``TypeError`` if the decorated object is not a ``ToolCallParser`` subclass.
    """
    names = [_key(n) for n in (name, *aliases)]
    if any(not n for n in names):
        raise ValueError(f"register_parser: empty parser name in {(name, *aliases)!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"register_parser: the same name is given twice in {(name, *aliases)!r}")

    def decorator(cls: ParserClass) -> ParserClass:
        if not (isinstance(cls, type) and issubclass(cls, ToolCallParser)):
            raise TypeError(
                f"@register_parser({name!r}) must decorate a ToolCallParser subclass, not {cls!r}"
            )
        mine = definition_of(cls)
        taken = [n for n in names if n in _PARSERS and _PARSERS[n] is not cls
                 and definition_of(_PARSERS[n]).key != mine.key]
        if taken:
            holders = ", ".join(
                f"{n!r} by {_PARSERS[n].__module__}.{_PARSERS[n].__qualname__} "
                f"({definition_of(_PARSERS[n]).location})" for n in taken
            )
            raise ValueError(
                f"tool-call parser name already registered: {holders}. Pick another name for "
                f"{cls.__module__}.{cls.__qualname__} ({mine.location}); names are global to "
                "the process."
            )
        for n in names:
            _PARSERS[n] = cls
        # every subclass gets its own canonical name even if it inherits from a registered parser
        cls.name = names[0]
        return cls

    return decorator


def get_parser(name: str) -> ToolCallParser:
    """Return a new instance of the parser registered as ``name`` (or one of its aliases).

    Unknown names raise ``KeyError`` listing every available name, so a typo in the
    ``tool_call_parser`` config field is fixed from the message alone.
    """
    cls = _PARSERS.get(_key(name)) if isinstance(name, str) else None
    if cls is None:
        raise KeyError(
            f"unknown tool-call parser {name!r}; available: {', '.join(list_parsers())}. "
            "Set tool_call_parser to one of these, or register your own with "
            "@register_parser(name) on a ToolCallParser subclass."
        )
    return cls()


def list_parsers() -> list[str]:
    """All registered names, aliases included, sorted. A fresh list: mutating it changes nothing."""
    return sorted(_PARSERS)
