"""Normalizers: the volatile parts of a request (a date, a uuid, a temp path) rewritten before
matching, so a replay on another day or machine still finds its recording.

A normalizer is either a built-in *name* (``"datetime"``, ``"uuid"``, ``"tmp-path"``,
``"epoch"``, ``"hex-id"``) or a custom ``(regex, replacement)`` pair. A cassette keeps its own
in the header (``normalizers``: names as strings, custom ones as ``[regex, replacement]``), so
every replay of it — CLI, folder, ``-j``, pytest, ``run_cassette``, ``--twice``, ``check`` —
applies them with no flag; what a caller passes is added to them.

Built-ins are applied first, in one fixed order (a uuid before the hex ids its last group
would look like, a date-time before the date and time it contains), then custom ones in the
order given. ``propose`` finds the built-ins a recording would need: values of their shapes in
the parts of requests the environment builds (system and user messages, prompts) — never in
model replies or tool results, which replay answers from the cassette.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_replay._cassette.normalizer_checks import (
    MAX_NORMALIZERS,
    MAX_PATTERN,
    bounded,
    check_custom,
)
from hermes_replay._cassette.normalizer_form import parse_form, shown

__all__ = ["BUILTINS", "MAX_NORMALIZERS", "MAX_PATTERN", "Builtin", "Proposal", "as_header",
           "displayed", "expand", "from_header", "parse_cli", "parse_kept", "propose", "shown",
           "specs", "use_problem"]

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|"
          r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?")
_WEEKDAY = (r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tue|Wed|Thu|"
            r"Fri|Sat|Sun)\b\.?")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"


@dataclass(frozen=True)
class Builtin:
    """A named normalizer: what it covers (for ``--list`` and proposals) and its rewrites."""

    name: str
    covers: str
    rewrites: tuple[tuple[str, str], ...]


def _tmp_roots() -> str:
    roots = [r"/tmp", r"/var/tmp", r"/var/folders", r"/private/var/folders", r"/dev/shm"]
    here = tempfile.gettempdir().rstrip("/\\")
    if here and here not in roots:
        roots.insert(0, re.escape(here))
    return "|".join(roots)


BUILTINS: dict[str, Builtin] = {b.name: b for b in (
    Builtin("uuid", "uuids (8-4-4-4-12 hex)", (
        (r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
         r"[0-9a-fA-F]{12}(?![0-9A-Za-z])", "<uuid>"),
    )),
    Builtin("datetime", "dates and times: ISO 8601, 2026-12-02 22:14, Dec 2, 2026, "
            "Wed, 02 Dec 2026, 12/02/2026, weekday names, 22:14, 10:14:05 PM", (
        (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?",
         "<datetime>"),
        # date(1) and ctime(): Wed Dec  2 00:53:10 UTC 2026
        (rf"\b{_WEEKDAY}\s+{_MONTH}\s+\d{{1,2}}\s+\d\d:\d\d:\d\d(?:\s+[A-Z]{{2,5}})?\s+\d{{4}}\b",
         "<datetime>"),
        (rf"\b(?:{_WEEKDAY},?\s+)?{_MONTH}\s+{_DAY},?(?:\s+\d{{4}})?\b", "<date>"),
        (rf"\b(?:{_WEEKDAY},?\s+)?{_DAY}\s+{_MONTH},?\s+\d{{4}}\b", "<date>"),
        (rf"\b{_WEEKDAY},?\s+{_DAY}\s+{_MONTH}", "<date>"),
        (r"\b\d{4}[-/.]\d\d[-/.]\d\d\b", "<date>"),
        (r"\b\d{1,2}[/.]\d{1,2}[/.](?:\d{4}|\d\d)\b", "<date>"),
        (r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b", "<weekday>"),
        (r"\b\d{1,2}:\d\d(?::\d\d(?:[.,]\d+)?)?(?:\s?[AaPp]\.?[Mm]\b\.?)?", "<time>"),
    )),
    Builtin("epoch", "Unix times in seconds (10 digits, maybe fractional) or milliseconds "
            "(13 digits)", (
        (r"(?<![\d.])1\d{12}(?![\d])", "<epoch>"),
        (r"(?<![\d.])1\d{9}(?:\.\d+)?(?![\d])", "<epoch>"),
    )),
    Builtin("tmp-path", "paths under the temp folder (/tmp/…, /var/folders/…, $TMPDIR)", (
        (rf"(?:{_tmp_roots()})(?:/[^\s\"'`<>|;,)\]}}]+)+", "<tmp>"),
    )),
    Builtin("hex-id", "hex ids of 12 or more digits with letters and numbers (request ids, "
            "hashes)", (
        (r"(?<![0-9A-Za-z])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{12,}(?![0-9A-Za-z])",
         "<hex>"),
        (r"(?<![0-9A-Za-z])(?=[0-9A-F]*[0-9])(?=[0-9A-F]*[A-F])[0-9A-F]{12,}(?![0-9A-Za-z])",
         "<hex>"),
    )),
)}

#: a custom normalizer: ``(regex, replacement)``; a built-in: its name
Spec = str | tuple[Any, str]


def _one(item: Any) -> Spec:
    if isinstance(item, str):
        if item not in BUILTINS:
            raise ValueError(f"no built-in normalizer {item!r}; the built-ins are "
                             f"{', '.join(BUILTINS)} (a custom one is a (regex, replacement) "
                             "pair, REGEX=REPLACEMENT on the command line)")
        return item
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], str):
        text = check_custom(item[0], item[1])  # the one check replay and verify share
        # compiled by the caller: its flags stay
        return (item[0], item[1]) if isinstance(item[0], re.Pattern) else (text, item[1])
    raise ValueError(f"a normalizer is a built-in name ({', '.join(BUILTINS)}) or a "
                     f"(regex, replacement) pair, not {item!r:.80}")


def specs(items: Iterable[Any]) -> list[Spec]:
    """Checked, de-duplicated normalizers in order; ValueError names a bad one, or says
    there are more than ``MAX_NORMALIZERS`` (each runs over every string of every request)."""
    out: list[Spec] = []
    for number, item in enumerate(items, start=1):
        if number > MAX_NORMALIZERS:
            raise ValueError(f"more than {MAX_NORMALIZERS} normalizers (each one runs over "
                             "every string of every request); keep the few the recording "
                             "needs, or join similar ones into one regex")
        try:
            spec = _one(item)
        except ValueError as exc:
            raise ValueError(f"normalizer {number}: {exc}") from None
        if spec not in out:
            out.append(spec)
    return out


def parse_cli(text: str) -> Spec:
    """``--normalize NAME`` (a built-in) or ``--normalize REGEX=REPLACEMENT``, split at the
    one ``=`` that is no part of the regex (``normalizer_form``: a literal ``=`` is written
    ``\\=``). ValueError says what is wrong and how to write it."""
    if text in BUILTINS:
        return text
    pair = parse_form(text)
    if pair is None:
        raise ValueError(f"{text!r}: expected a built-in name ({', '.join(BUILTINS)}) or "
                         "REGEX=REPLACEMENT, e.g. 'datetime' or '\\bREQ-\\d+=<req>'")
    pattern, replacement = pair
    if not pattern:
        raise ValueError(f"{text!r}: the regex before '=' is empty")
    return (check_custom(pattern, replacement), replacement)


def parse_kept(text: str) -> Any:
    """``--remove``'s value in the header's JSON form (a name, or ``[regex, replacement]``),
    not checked: a normalizer replay refuses must still be removable."""
    try:
        pair = parse_form(text)
    except ValueError:
        pair = None  # ambiguous: compared as typed, and named as not kept
    return text if pair is None else list(pair)


def expand(items: Sequence[Spec]) -> tuple[tuple[str, str], ...]:
    """The ``(regex, replacement)`` rewrites of ``items``: built-ins first in their fixed
    order, then custom ones as given, compiled so each use is bounded in time (built-ins are
    ours, and ``re`` is faster on them)."""
    names = {i for i in items if isinstance(i, str)}
    out: list[tuple[Any, str]] = [pair for name in BUILTINS if name in names
                                  for pair in BUILTINS[name].rewrites]
    out += [(bounded(i[0]), i[1]) for i in items if not isinstance(i, str)]
    return tuple(out)


def as_header(items: Sequence[Spec]) -> list[Any]:
    """The header's JSON form: names as strings, custom ones as ``[regex, replacement]``."""
    return [i if isinstance(i, str) else [getattr(i[0], "pattern", i[0]), i[1]] for i in items]


def from_header(value: Any) -> list[Spec]:
    """The header's ``normalizers``, checked (a cassette is data from outside); ValueError
    names what is wrong."""
    if value in (None, []):
        return []
    if not isinstance(value, list):
        raise ValueError(f"normalizers must be a list, not {type(value).__name__}")
    return specs(value)


def use_problem(items: Sequence[Spec], requests: Iterable[dict[str, Any]]) -> str | None:
    """What stops the custom normalizers ``items`` on these recorded ``requests`` — one that
    makes a request too long, or runs too long — as a replay's index meets it when it opens
    the cassette (``verify`` says so too), or None."""
    from hermes_replay._cassette.matching import Matcher
    from hermes_replay._cassette.normalizer_checks import NormalizerStopped

    if all(isinstance(i, str) for i in items):
        return None  # built-ins are ours
    matcher = Matcher.build(normalizers=expand(items))
    try:
        for request in requests:
            matcher.canonical(request)
    except NormalizerStopped as exc:
        return str(exc)
    return None


def describe(spec: Spec) -> str:
    """One line for ``--list`` and messages."""
    if isinstance(spec, str):
        return f"{spec}  (built-in: {BUILTINS[spec].covers})"
    return displayed(spec)


def displayed(item: Any) -> str:
    """A kept normalizer as ``--add``/``--remove`` take it, for a terminal: a header's text,
    so its control characters are shown escaped, never sent to the terminal."""
    from hermes_replay._terminal.render import sanitize

    return sanitize(shown(item))


# --------------------------------------------------------------------------- proposals


@dataclass(frozen=True)
class Proposal:
    """A built-in normalizer a recording needs: a value of its shape the environment put in a
    request (``example``), where it was first seen."""

    name: str
    example: str  # the values seen, quoted: "'2026-12-02', '22:14'"
    field: str
    rollout: str | None
    turn: int  # 1-based

    def where(self) -> str:
        who = f"rollout {self.rollout}" if self.rollout else "outside any rollout"
        return f"{self.field} ({who}, turn {self.turn})"


# the request parts the environment builds; model replies and tool results come from the
# cassette on replay, so a date in those never makes a miss
_BUILT_ROLES = ("system", "developer", "user")


def _env_texts(body: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(body, dict):
        return
    messages = body.get("messages")
    if isinstance(messages, list):
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict) or msg.get("role") not in _BUILT_ROLES:
                continue
            content = msg.get("content")
            if isinstance(content, str):
                yield f"body.messages[{i}].content", content
            elif isinstance(content, list):
                for k, part in enumerate(content):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        yield f"body.messages[{i}].content[{k}].text", part["text"]
    for key in ("prompt", "instructions", "input"):
        if isinstance(body.get(key), str):
            yield f"body.{key}", body[key]


def item_text(text: str) -> str:
    """A group's kept item (its canonical JSON) as the text a request may quote: the JSON and
    every string in it, unescaped."""
    import json

    strings: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                strings.append(str(k))
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    try:
        walk(json.loads(text))
    except ValueError:
        pass
    return "\n".join([text, *strings])


def propose(interactions: Iterable[Any], canonical: Any, have: Sequence[Spec] = (),
            items: dict[str, str] | None = None) -> list[Proposal]:
    """The built-ins not in ``have`` whose values appear in what the environment sent.

    ``canonical`` is the matcher's ``canonical`` (ignored paths removed, the normalizers the
    recording already keeps applied), so a value already taken care of is not proposed again.
    Built-ins are tried in their fixed order on text the earlier ones already rewrote (the
    last group of a uuid is no hex id). ``items`` (rollout → the text of the item it was
    drawn for, ``item_text``): a value that is the item's own — a weekday in a dataset's
    question — is the same in every run, never proposed."""
    found: dict[str, Proposal] = {}
    seen: set[tuple[str, str]] = set()
    wanted = [b for name, b in BUILTINS.items() if name not in have]
    compiled = [(b, [(re.compile(p), r) for p, r in b.rewrites]) for b in BUILTINS.values()]
    for inter in interactions:
        body = canonical(inter.request).get("body")
        item = (items or {}).get(inter.rollout or "", "")
        for where, text in _env_texts(body):
            if (text, item) in seen:  # every turn repeats the system prompt: look once
                continue  # (per item: a word of one item's text may vary in another's)
            seen.add((text, item))
            for builtin, rewrites in compiled:
                examples: list[str] = []
                for regex, repl in rewrites:
                    examples += [m.group(0) for m in regex.finditer(text)
                                 if not (item and m.group(0) in item)]
                    text = regex.sub(repl, text)
                if examples and builtin in wanted and builtin.name not in found:
                    shown = ", ".join(repr(e) for e in dict.fromkeys(examples[:6]))
                    found[builtin.name] = Proposal(builtin.name, shown, where, inter.rollout,
                                                   inter.seq + 1)
    return [found[name] for name in BUILTINS if name in found]
