"""A custom normalizer on the command line: ``REGEX=REPLACEMENT``, split without guessing
(trust round 5, finding 12).

Splitting at the first ``=`` made ``request_id=[0-9]+=<id>`` the regex ``request_id`` (stored
silently, echoed back by ``--list`` as typed), and a lookbehind ``(?<=…)`` could not be given at
all. The separator is now the one ``=`` that is not part of the regex:

- ``=`` in the regex's own syntax stays in the regex: ``(?=``, ``(?<=``, ``(?!=``… lookarounds,
  ``(?P=name)``, and any ``=`` inside a character class ``[…]``;
- a literal ``=`` is written ``\\=`` (in the regex, or in the replacement), and read as ``=``;
- when several ``=`` could separate, the one reading whose regex compiles is taken
  (``(?<=id=)\\d+=<id>``); two that compile (``request_id=[0-9]+=<id>``) are ambiguous and
  refused, saying how to write it.

``shown`` writes a kept normalizer back in this form, so what ``--list`` prints can be pasted
into ``--remove`` and means the same normalizer.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_form", "shown"]

_EXAMPLE = "e.g. 'request_id\\=[0-9]+=<id>' or '(?<=id\\=)\\d+=<id>'"


def _regex_syntax(text: str, at: int) -> bool:
    """The ``=`` at ``at`` belongs to a group's syntax: ``(?=``, ``(?<=``, ``(?P=``."""
    return text[:at].endswith(("(?", "(?<", "(?P"))


def _walk(text: str) -> Any:
    """Each character of ``text`` as ``(index, piece, kind)``: kind ``"escape"`` (a
    backslash and the character after it), ``"sep"`` (an ``=`` that is no part of the
    regex's syntax), or ``"char"``."""
    class_from = -1  # where the open character class started, or -1
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            yield i, text[i:i + 2], "escape"
            i += 2
            continue
        if class_from >= 0:
            # "[]…]" and "[^]…]" hold a "]" as their first member
            if char == "]" and i > class_from + 1 and text[class_from + 1:i] != "^":
                class_from = -1
        elif char == "[":
            class_from = i
        elif char == "=" and not _regex_syntax(text, i):
            yield i, char, "sep"
            i += 1
            continue
        yield i, char, "char"
        i += 1


def parse_form(text: str) -> tuple[str, str] | None:
    """``(regex, replacement)`` from ``REGEX=REPLACEMENT``, or None when ``text`` holds no
    separating ``=`` (a built-in's name, or a mistake the caller names). When several ``=``
    could separate, the one split whose regex compiles is taken; ValueError when more than
    one does (``request_id=[0-9]+=<id>``): which was meant would be a guess."""
    readings: list[tuple[str, str]] = []
    pattern: list[str] = []
    for at, piece, kind in _walk(text):
        if kind == "sep":
            readings.append(("".join(pattern), text[at + 1:]))
        pattern.append("=" if piece == "\\=" else piece)
    if not readings:
        return None
    compiling = [r for r in readings if _compiles(r[0])]
    if len(compiling) > 1:
        shown_readings = " or ".join(f"regex {p!r:.60} with replacement {r!r:.40}"
                                     for p, r in compiling[:2])
        raise ValueError(
            f"{text!r:.120} can be read {len(compiling)} ways ({shown_readings}); write each "
            f"'=' that belongs to the regex or the replacement as '\\=' ({_EXAMPLE})")
    pattern_text, replacement = (compiling or readings)[0]  # none compiles: the check says why
    return pattern_text, replacement.replace("\\=", "=")


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return bool(pattern)


def _escaped_regex(pattern: str) -> str:
    """``pattern`` with each ``=`` that is not regex syntax written ``\\=``."""
    return "".join("\\=" if kind == "sep" else piece for _, piece, kind in _walk(pattern))


def shown(item: Any) -> str:
    """A normalizer (a name, or a ``(regex, replacement)`` pair in any of its forms) as the
    command line writes it: ``parse_form(shown(pair)) == pair``."""
    if isinstance(item, (list, tuple)) and len(item) == 2:
        regex = getattr(item[0], "pattern", item[0])
        if isinstance(regex, str) and isinstance(item[1], str):
            return f"{_escaped_regex(regex)}={item[1].replace('=', chr(92) + '=')}"
        return f"{regex}={item[1]}"
    return str(item)
