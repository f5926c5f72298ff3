"""What a custom normalizer can erase or add, judged before it is used (trust round 5,
findings 04 and 05). ``normalizer_checks.check_custom`` calls ``reach_problem``.

A normalizer from a header is data from outside. Round 4 refused one that rewrites a quarter
of a short sample, or that matches the empty string. Two shapes passed that check:

- **Zero-width, with something to insert** (``(?=.)`` with a 2,000-character replacement): it
  matches nothing the share can count, yet inserts its replacement before every character —
  a 41 KB request became 80 MB and the replay ran out of memory. A pattern that can match
  zero characters may only delete (an empty replacement inserts nothing); a replacement is
  at most ``MAX_REPLACEMENT`` characters; and each use is bounded in what it may add
  (``MAX_GROWTH``, enforced in ``normalizer_checks._Bounded``).
- **Anchored on a position, not on text** (``(?s)(?<=.{70}).+``): the samples are shorter than
  70 characters, so it rewrote none of them, yet it erases everything after character 70 of
  every string — a changed prompt replayed ``ok``. So a normalizer is judged by what it can
  erase: an unbounded ``.``-repeat (``.+``, ``.*``, ``[\\s\\S]*``, ``.{3,}``) reaches to the
  end of the line or text; a lookbehind holding a wildcard repeat, or wider than
  ``MAX_LOOKBEHIND``, anchors on a position — both refused statically. And by a probe: two
  long ordinary texts that differ in one letter of a word must still differ once
  normalized, at every place tried (``_probe_erases``).
"""

from __future__ import annotations

import re
from re import _constants as C  # sre opcodes
from re import _parser
from typing import Any

__all__ = ["MAX_GROWTH", "MAX_LOOKBEHIND", "MAX_REPLACEMENT", "max_length", "reach_problem"]

# A placeholder (``<uuid>``, ``<req-id>``) is short; a long one only inflates every request.
MAX_REPLACEMENT = 200
# A lookbehind that names text is short (``(?<=id=)``); a wide one anchors on a position.
MAX_LOOKBEHIND = 64
# One use may make a string at most this many times longer, plus ``_SLACK`` characters (a
# ``\d{4}`` → ``<year>`` rewrite grows by half; ``(?=.)`` → 2,000 characters grew 2,000-fold).
MAX_GROWTH = 4
_SLACK = 1024

# Ordinary text, long enough that a position-anchored pattern has room to act: the probe
# changes one letter of a word at places spread over it.
_PROBE = (
    "You are a helpful assistant working in a sandbox. Read the task, plan the steps, call "
    "the tools you need and report what you found. Keep answers short and cite the files you "
    "read. When a command fails, read its error before trying again; never guess a path. "
    "The user asked: which of the three reports mentions the largest harbour, and what does "
    "the appendix say about tides? The search tool returned four pages; the second one "
    "quotes the harbour master, who writes that the winter storms moved the northern "
    "breakwater by several metres. ") * 3
_PROBE_STEP = 41  # a change every ~41 characters: ~40 places over the probe text


def _universal(op: Any, av: Any) -> bool:
    """``.`` (with or without DOTALL), or a class holding a category and its negation
    (``[\\s\\S]``, ``[\\w\\W]``, ``[\\d\\D]``): matches (almost) any character."""
    if op is C.ANY:
        return True
    if op is C.IN:
        cats = {a for o, a in av if o is C.CATEGORY}
        pairs = ((C.CATEGORY_SPACE, C.CATEGORY_NOT_SPACE), (C.CATEGORY_WORD,
                 C.CATEGORY_NOT_WORD), (C.CATEGORY_DIGIT, C.CATEGORY_NOT_DIGIT))
        return any(a in cats and b in cats for a, b in pairs)
    return False


def _wildcard_repeat(items: Any, *, unbounded_only: bool) -> bool:
    """Whether ``items`` holds a repeat of a universal character (only an unbounded one, or
    any with more than one character, per ``unbounded_only``)."""
    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            _, high, body = av
            body = list(body)
            single = len(body) == 1 and _universal(*body[0])
            if single and (high == C.MAXREPEAT if unbounded_only else high > 1):
                return True
            if _wildcard_repeat(body, unbounded_only=unbounded_only):
                return True
        elif op is C.SUBPATTERN and _wildcard_repeat(av[3], unbounded_only=unbounded_only):
            return True
        elif op is C.ATOMIC_GROUP and _wildcard_repeat(av, unbounded_only=unbounded_only):
            return True
        elif op is C.BRANCH and any(_wildcard_repeat(b, unbounded_only=unbounded_only)
                                    for b in av[1]):
            return True
        elif op in (C.ASSERT, C.ASSERT_NOT) and av[0] >= 0 \
                and _wildcard_repeat(av[1], unbounded_only=unbounded_only):
            return True
    return False


def _lookbehind_problem(items: Any) -> str | None:
    for op, av in items:
        if op in (C.ASSERT, C.ASSERT_NOT) and av[0] < 0:
            body = list(av[1])
            width = av[1].getwidth()[1] if hasattr(av[1], "getwidth") else 0
            if _wildcard_repeat(body, unbounded_only=False) or width > MAX_LOOKBEHIND:
                return ("its lookbehind is a count of characters, not text (like (?<=.{70})): "
                        "it anchors on a position, so it rewrites whatever stands there")
        nested = (av[3] if op is C.SUBPATTERN else av if op is C.ATOMIC_GROUP else
                  av[2] if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) else
                  av[1] if op in (C.ASSERT, C.ASSERT_NOT) else None)
        if op is C.BRANCH:
            found = next((p for p in map(_lookbehind_problem, av[1]) if p), None)
        else:
            found = _lookbehind_problem(nested) if nested is not None else None
        if found:
            return found
    return None


def _can_match_empty(compiled: re.Pattern[str]) -> bool:
    """Whether the pattern matches zero characters somewhere in ordinary text (a lookahead
    ``(?=.)``, a ``\\b``, ``x*``): what the empty-string check misses."""
    return any(m.end() == m.start() for m in compiled.finditer(_PROBE[:400]))


def _probe_erases(compiled: re.Pattern[str], replacement: str) -> int | None:
    """The first place in the probe text where changing one letter of a word makes no
    difference once normalized, or None (the normalizer keeps every change there)."""
    normalized = compiled.sub(replacement, _PROBE)
    if normalized == _PROBE:
        return None  # it changes nothing here: no change of one letter can be erased
    for at in range(7, len(_PROBE), _PROBE_STEP):
        while at < len(_PROBE) and not _PROBE[at].isalpha():
            at += 1
        if at >= len(_PROBE):
            break
        other = "x" if _PROBE[at].lower() != "x" else "q"
        changed = _PROBE[:at] + other + _PROBE[at + 1:]
        if compiled.sub(replacement, changed) == normalized:
            return at
    return None


def reach_problem(compiled: re.Pattern[str], text: str, replacement: str) -> str | None:
    """Why the normalizer ``(text, replacement)`` would erase (or add) what it must not, with
    what to write instead; None when its reach is bounded."""
    if len(replacement) > MAX_REPLACEMENT:
        return (f"its replacement is {len(replacement):,} characters long (at most "
                f"{MAX_REPLACEMENT}): a placeholder names a value, like <uuid> or <req-id>")
    if replacement and _can_match_empty(compiled):
        return ("it can match zero characters (a lookahead such as (?=.), \\b, x*), so its "
                "replacement would be inserted between characters of every string; make it "
                "consume the volatile value itself")
    try:
        parsed = _parser.parse(text)
    except (re.error, RecursionError, OverflowError):
        return None  # the compile step reported it
    if _wildcard_repeat(parsed, unbounded_only=True):
        return ("it has an unbounded wildcard (.+, .*, [\\s\\S]*, .{3,}): it erases everything "
                "up to the end of the line or text, so a changed request would compare equal; "
                "bound it (.{1,40}) or name the value's shape (\\d+, [0-9a-f]{32})")
    problem = _lookbehind_problem(parsed)
    if problem:
        return problem
    at = _probe_erases(compiled, replacement)
    if at is not None:
        return (f"it erases ordinary text: two texts that differ in one letter at character "
                f"{at} of a probe compare equal once it is applied, so a changed request "
                "would replay as a hit; name only the volatile value")
    return None


def max_length(before: int) -> int:
    """The longest a ``before``-character string may become by normalizing: more is beyond
    what any placeholder rewrite adds (``MAX_GROWTH``-fold plus ``_SLACK``)."""
    return MAX_GROWTH * before + _SLACK
