"""Is a custom normalizer safe to apply? The one check ``replay``, ``verify``,
``normalize --add`` and ``--normalize`` share (``normalizers._one`` calls it).

A custom normalizer is a regex and a replacement, and it may come from a cassette header —
data from outside. Three ways it can betray a replay, each refused here with what to write
instead:

- **It backtracks without end.** Python's ``re`` has no timeout, so a pattern whose repeated
  group can split the same text in more than one way (``(?:\\w+\\s?)+QQQ``, ``(a+)+b``,
  ``(a|aa)+$``) runs for ages on a long enough string. Refused statically: a repeat (``+``,
  ``*``, ``{2,}``) around a body that holds another variable repeat or an alternation with
  nothing required after it. Possessive repeats and atomic groups (``a++``, ``(?>…)``) do not
  backtrack and pass. Whatever slips by is still bounded in time per use (``bounded``).
- **It names everything.** ``(?s).+`` or ``\\S+`` rewrites ordinary text wholesale, so two
  different requests compare equal and a changed request replays as a hit. A normalizer that
  rewrites a quarter or more of a fixed sample of ordinary text (prose, JSON, code) — or one
  that matches the empty string — is refused.
- **Its replacement cannot be expanded** (``\\9`` with one group): refused here, not as
  ``re.error`` in the middle of a replay.
"""

from __future__ import annotations

import re
from re import _constants as C  # sre opcodes (the parser below speaks them)
from re import _parser
from typing import Any

from hermes_replay._cassette.normalizer_reach import MAX_GROWTH, max_length, reach_problem

__all__ = [
    "MAX_NORMALIZERS",
    "MAX_PATTERN",
    "USE_TIMEOUT",
    "NormalizerGrew",
    "NormalizerStopped",
    "NormalizerTooSlow",
    "backtracking_problem",
    "bounded",
    "check_custom",
]

# Regexes come from cassettes too: long ones are refused, so a hostile header cannot hand the
# matcher an unbounded pattern to chew on.
MAX_PATTERN = 500
# Each normalizer runs over every string of every request: 5,000 of them took 7 s to open a
# cassette. Real ones number a handful.
MAX_NORMALIZERS = 64
# Seconds one normalizer may take on one string before the replay stops, naming it.
USE_TIMEOUT = 2.0

# Ordinary text with nothing volatile in it: a normalizer that rewrites much of it names
# everything, not a volatile value.
_SAMPLE = (
    "You are a helpful assistant. Answer the question using the tools you have; think step "
    "by step and keep the final answer short.",
    "What is the capital of France? Please explain how you found it.",
    '{"name": "calculator", "arguments": {"expression": "two plus three", "unit": "none"}}',
    "def compute_reward(item, result):\n    return float(result.answer == item['gold'])\n",
    "The model called search twice, read the page, and wrote: Paris is the capital.",
)
_BROAD_SHARE = 0.25

_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)


class NormalizerStopped(BaseException):
    """A custom normalizer was stopped in the middle of a use: it ran too long
    (``NormalizerTooSlow``) or made a string too long (``NormalizerGrew``).

    A ``BaseException``, as ``RequestNotRecorded`` is: retry layers catch ``Exception`` and
    would run the pattern again and again; this ends the run, naming the normalizer."""

    pattern: str


class NormalizerGrew(NormalizerStopped):
    """One use of a custom normalizer made a string more than ``MAX_GROWTH`` times longer
    (plus a little): a replacement inserted all over the text (trust round 5, finding 04)."""

    def __init__(self, pattern: str, length: int) -> None:
        self.pattern = pattern
        super().__init__(
            f"the normalizer {pattern!r:.120} made a {length:,}-character string longer than "
            f"{MAX_GROWTH} times its length and was stopped (a replacement inserted all over "
            "the text would inflate every request); next step: make it rewrite only the "
            "volatile value, or remove it (hermes-replay normalize CASSETTE --remove "
            "'REGEX=REPLACEMENT')")


class NormalizerTooSlow(NormalizerStopped):
    """A custom normalizer ran longer than ``USE_TIMEOUT`` on one string."""

    def __init__(self, pattern: str, length: int) -> None:
        self.pattern = pattern
        super().__init__(
            f"the normalizer {pattern!r:.120} ran longer than {USE_TIMEOUT:g} s on one "
            f"{length:,}-character string and was stopped; next step: rewrite it so its "
            "repeats cannot split the same text two ways (possessive a++ or atomic (?>…)), "
            "or remove it (hermes-replay normalize CASSETTE --remove 'REGEX=REPLACEMENT')")


def _can_be_empty(items: Any) -> bool:
    """Whether a parsed sequence can match the empty string (conservatively: yes if unsure)."""
    for op, av in items:
        if op in _REPEATS or op is C.POSSESSIVE_REPEAT:
            if av[0] > 0 and not _can_be_empty(av[2]):
                return False
        elif op is C.SUBPATTERN:
            if not _can_be_empty(av[3]):
                return False
        elif op is C.ATOMIC_GROUP:
            if not _can_be_empty(av):
                return False
        elif op is C.BRANCH:
            if not any(_can_be_empty(b) for b in av[1]):
                return False
        elif op in (C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY):
            return False
    return True


def _ambiguous_body(items: Any) -> bool:
    """A repeated body that can split the same text two ways: a variable repeat or an
    alternation followed (in the body) by nothing required."""
    seq = list(items)
    for i, (op, av) in enumerate(seq):
        rest_optional = _can_be_empty(seq[i + 1:])
        if op in _REPEATS and av[1] != av[0] and rest_optional:
            return True
        if op is C.BRANCH and rest_optional:
            return True
        if op is C.SUBPATTERN and rest_optional and _ambiguous_body(av[3]):
            return True
    return False


def _walk(items: Any) -> str | None:
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            if high > 1 and high != low and _ambiguous_body(body):
                return "a repeated group that can split the same text in more than one way"
            found = _walk(body)
        elif op is C.POSSESSIVE_REPEAT or op is C.ATOMIC_GROUP:
            found = None  # never backtracks into itself
        elif op is C.SUBPATTERN:
            found = _walk(av[3])
        elif op is C.BRANCH:
            found = next((p for p in map(_walk, av[1]) if p), None)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            found = _walk(av[1])
        else:
            found = None
        if found:
            return found
    return None


def backtracking_problem(pattern: str) -> str | None:
    """Why ``pattern`` may backtrack without end (nested or ambiguous repeats), or None."""
    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None  # the compile step reports it
    return _walk(parsed)


def check_custom(pattern: Any, replacement: str) -> str:
    """``pattern``'s text if the custom normalizer ``(pattern, replacement)`` is safe to apply;
    else ValueError naming what is wrong and what to write instead."""
    compiled = pattern if isinstance(pattern, re.Pattern) else None
    text = pattern.pattern if compiled is not None else pattern
    if not isinstance(text, str) or not text:
        raise ValueError(f"a normalizer's regex must be a non-empty string, not {text!r:.60}")
    if len(text) > MAX_PATTERN:
        raise ValueError(f"a normalizer's regex is {len(text)} characters long (at most "
                         f"{MAX_PATTERN})")
    try:
        compiled = compiled or re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a regex: {exc}") from None
    problem = backtracking_problem(text)
    if problem:
        raise ValueError(f"{text!r:.120} can backtrack without end ({problem}, e.g. "
                         "(?:\\w+\\s?)+ or (a|aa)+): write each repeat so it cannot overlap "
                         "the next, or make it possessive (a++) or atomic ((?>…))")
    try:
        compiled.sub(replacement, "")  # parses the template: a bad group reference raises
    except (re.error, IndexError) as exc:
        raise ValueError(f"the replacement {replacement!r:.60} of {text!r:.60} cannot be "
                         f"used: {exc} (the regex has {compiled.groups} group(s); a literal "
                         "backslash is written \\\\)") from None
    if compiled.search("") is not None:
        raise ValueError(f"{text!r:.120} matches the empty string, so it would rewrite "
                         "between every two characters; make it match at least one "
                         "character (e.g. \\s+ rather than \\s*)")
    _refuse_broad(compiled, text, replacement)
    reach = reach_problem(compiled, text, replacement)  # what it can erase or insert
    if reach:
        raise ValueError(f"{text!r:.120}: {reach}")
    return text


def _refuse_broad(compiled: re.Pattern[str], text: str, replacement: str) -> None:
    total = changed = 0
    for sample in _SAMPLE:
        total += len(sample)
        for match in compiled.finditer(sample):
            if match.expand(replacement) != match.group(0):
                changed += len(match.group(0))
    if changed >= _BROAD_SHARE * total:
        raise ValueError(
            f"{text!r:.120} matches everything: it rewrites {changed * 100 // total}% of "
            "ordinary text (prose, JSON, code), so two different requests would compare "
            "equal and a changed request would replay as a hit; name only the volatile "
            "value (e.g. \\bREQ-\\d+ or a built-in: datetime, uuid, tmp-path, epoch, hex-id)")


# --------------------------------------------------------------------------- bounded in time

# re's flags as the ``regex`` module numbers them (ASCII differs: 256 in re, 128 in regex)
_FLAGS = ((re.IGNORECASE, "IGNORECASE"), (re.MULTILINE, "MULTILINE"), (re.DOTALL, "DOTALL"),
          (re.VERBOSE, "VERBOSE"), (re.ASCII, "ASCII"), (re.UNICODE, "UNICODE"))


class _Grew(Exception):
    """A use went past its bound (inside ``regex.sub``; raised again as ``NormalizerGrew``)."""


class _Bounded:
    """A custom normalizer's regex compiled by the ``regex`` module (re's syntax, its
    ``VERSION0``), whose ``sub`` takes a timeout — ``re`` cannot be interrupted, and a thread
    cannot stop it. ``pattern`` keeps the text, so the matcher's signature is unchanged."""

    def __init__(self, pattern: str | re.Pattern[str]) -> None:
        import regex

        self.pattern = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        flags = regex.VERSION0
        if isinstance(pattern, re.Pattern):
            for flag, name in _FLAGS:
                if pattern.flags & flag:
                    flags |= getattr(regex, name)
        self._regex = regex.compile(self.pattern, flags)

    def sub(self, replacement: str, value: str) -> str:
        # what the use adds is counted match by match and stopped at the bound, so a
        # replacement inserted everywhere never builds the huge string first
        room = max_length(len(value)) - len(value)
        added = 0

        def one(match: Any) -> str:
            nonlocal added
            out = match.expand(replacement) if "\\" in replacement else replacement
            added += len(out) - (match.end() - match.start())
            if added > room:
                raise _Grew
            return out

        try:
            return self._regex.sub(one, value, timeout=USE_TIMEOUT)
        except TimeoutError:
            raise NormalizerTooSlow(self.pattern, len(value)) from None
        except _Grew:
            raise NormalizerGrew(self.pattern, len(value)) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Bounded) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"bounded({self.pattern!r})"


def bounded(pattern: str | re.Pattern[str]) -> Any:
    """``pattern`` compiled so that one use of it is bounded in time (``NormalizerTooSlow``)."""
    return _Bounded(pattern)
