"""Request matching: canonical form, fingerprints, and the diff shown on a miss.

A request (the stored form: ``{"method", "url", "headers", "body"}``, already redacted)
becomes a *canonical* value — method, path, non-secret query and the JSON body with
ignored paths removed and normalizers applied — and its fingerprint is a hash of that
value serialised with sorted keys. Host and headers are never part of it: replay may use
another port, and SDK headers (``x-stainless-*``, user-agent) change between versions.

Recorded fingerprints are recomputed with the *current* matcher at load time, so adding
an ignore path or a normalizer takes effect on an existing cassette without re-recording.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import marshal
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hermes_replay._cassette.normalizer_checks import NormalizerGrew
from hermes_replay._cassette.normalizer_reach import max_length

__all__ = ["DEFAULT_IGNORE_PATHS", "SHOWN_FIELDS", "FieldChange", "Matcher", "check_ignore_path",
           "field_changes", "field_report", "request_path", "similarity", "unified_request_diff"]

# Fields that carry no meaning for what the model answers, or that differ run to run.
DEFAULT_IGNORE_PATHS: tuple[str, ...] = ("body.user", "body.metadata", "body.stream_options")

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")
# a whole ignore path: a name, then ``.name``, ``[N]`` or ``[*]`` steps
_WHOLE_PATH = re.compile(r"[^.\[\]]+(?:\.[^.\[\]]+|\[(?:\*|\d+)\])*")


def check_ignore_path(path: str) -> None:
    """Raise ``ValueError`` unless ``path`` is a whole ignore path (``body.metadata``,
    ``body.messages[*].name``): ``...`` or ``[`` used to be read as nothing, or crash later."""
    if not isinstance(path, str) or not _WHOLE_PATH.fullmatch(path):
        raise ValueError(
            f"{path!r} is not a field path; write dotted names, with [N] or [*] for list "
            "items, e.g. 'body.metadata' or 'body.messages[*].name'")


def _parse_path(path: str) -> tuple[str | int, ...]:
    """``"body.messages[*].content"`` → ``("body", "messages", "*", "content")``.

    ``*`` matches any dict key or list index; ``[N]`` one list index.
    """
    check_ignore_path(path)
    parts: list[str | int] = []
    for name, index in _SEGMENT.findall(path):
        if name:
            parts.append(name)
        elif index == "*":
            parts.append("*")
        else:
            parts.append(int(index))
    if not parts:
        raise ValueError(f"empty ignore path {path!r}; use e.g. 'body.metadata'")
    return tuple(parts)


def _remove(value: Any, parts: Sequence[str | int]) -> Any:
    """A copy of ``value`` without the nodes addressed by ``parts``."""
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            hit = head == "*" or head == key
            if hit and not rest:
                continue
            out[key] = _remove(item, rest) if hit else item
        return out
    if isinstance(value, list):
        if head == "*":
            return [_remove(item, rest) for item in value] if rest else []
        if isinstance(head, int) and 0 <= head < len(value):
            if not rest:
                return value[:head] + value[head + 1:]
            return [*value[:head], _remove(value[head], rest), *value[head + 1:]]
    return value


def request_path(url: str) -> str:
    """The path part of a URL (``/v1/chat/completions``)."""
    return urlsplit(url).path or "/"


# Bump when ``canonical``/``fingerprint`` change what they hash: stored fingerprints are then
# recomputed on load instead of trusted.
FINGERPRINT_VERSION = 1


@dataclass(frozen=True)
class Matcher:
    """Turns requests into fingerprints, and renders them for a readable miss diff.

    ``ignore_paths`` address fields of ``{"method","path","query","body"}`` (e.g.
    ``"body.messages[*].name"``); ``normalizers`` are ``(regex, replacement)`` pairs applied
    to every string in the body before hashing (timestamps, tmp paths, uuids).
    """

    ignore_paths: tuple[str, ...] = DEFAULT_IGNORE_PATHS
    normalizers: tuple[tuple[str | re.Pattern[str], str], ...] = ()
    _parsed: tuple[tuple[str | int, ...], ...] = field(init=False, repr=False, compare=False)
    _regexes: tuple[tuple[re.Pattern[str], str], ...] = field(
        init=False, repr=False, compare=False
    )
    _body_ignores: frozenset[str] | None = field(init=False, repr=False, compare=False)
    # an item's canonical text by its ``marshal`` bytes (``_canonical_text``), and their size
    _texts: dict[bytes, str] = field(init=False, repr=False, compare=False)
    _texts_size: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_parsed", tuple(_parse_path(p) for p in self.ignore_paths))
        # top-level body keys the ignore paths remove, or None when a path reaches further
        # (into list items, or ``*``): then the canonical text is made the plain way
        names: set[str] | None = set()
        for parts in self._parsed:
            if parts[0] == "body" and len(parts) == 2 and isinstance(parts[1], str) \
                    and parts[1] != "*":
                names.add(parts[1])  # type: ignore[union-attr]
            elif parts[0] in ("body", "*"):
                names = None
                break
        object.__setattr__(self, "_body_ignores", None if names is None else frozenset(names))
        object.__setattr__(self, "_texts", {})
        object.__setattr__(self, "_texts_size", [0])
        regexes = []
        for pattern, repl in self.normalizers:
            regexes.append((re.compile(pattern) if isinstance(pattern, str) else pattern, repl))
        object.__setattr__(self, "_regexes", tuple(regexes))

    @classmethod
    def build(
        cls,
        ignore_paths: Iterable[str] | None = None,
        normalizers: Iterable[tuple[str | re.Pattern[str], str]] | None = None,
        *,
        default_ignores: bool = True,
    ) -> Matcher:
        paths = list(DEFAULT_IGNORE_PATHS) if default_ignores else []
        paths.extend(ignore_paths or ())
        return cls(tuple(paths), tuple(normalizers or ()))

    def _normalize(self, value: Any) -> Any:
        if isinstance(value, str):
            start = len(value)  # bounded along the whole chain, not per normalizer
            for regex, repl in self._regexes:
                value = regex.sub(repl, value)
                if len(value) > max_length(start):
                    raise NormalizerGrew(getattr(regex, "pattern", str(regex)), start)
            return value
        if isinstance(value, list):
            return [self._normalize(v) for v in value]
        if isinstance(value, dict):
            return {k: self._normalize(v) for k, v in value.items()}
        return value

    def canonical(self, request: dict[str, Any]) -> dict[str, Any]:
        url = request.get("url", "")
        parts = urlsplit(url)
        canon: dict[str, Any] = {
            "method": str(request.get("method", "GET")).upper(),
            "path": parts.path or "/",
            "query": sorted(parse_qsl(parts.query, keep_blank_values=True)),
            "body": request.get("body"),
        }
        for path in self._parsed:
            canon = _remove(canon, path)
        if self._regexes:
            canon = self._normalize(canon)
        return canon

    def signature(self) -> str:
        """Identifies how this matcher fingerprints: a cassette written by a matcher with the
        same signature can be trusted to hold the fingerprints this one would compute."""
        spec = [FINGERPRINT_VERSION, list(self.ignore_paths),
                [[getattr(p, "pattern", p), r] for p, r in self.normalizers]]
        text = json.dumps(spec, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def fingerprint(self, request: dict[str, Any]) -> str:
        text = self._canonical_text(request)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def _canonical_text(self, request: dict[str, Any]) -> str:
        """``json.dumps(canonical(request), sort_keys=True, ...)``, with the text of each
        object in a top-level body list (an agent's messages) remembered.

        Why: a rollout's turn N repeats turns 0..N-1, so serialising the whole canonical
        body with sorted keys, every request, was a quarter of what the recorder spent on
        one (125 of about 500 µs in a loop over 400 SDK requests).
        An item's text depends only on the item and this matcher's normalizers; it is
        looked up by ``marshal``'s bytes of the item, which are equal only for values of
        equal types, key order and content (``==`` would take ``1`` for ``True``, whose
        JSON differs); format 2, whose bytes hang on nothing else (later formats mark
        objects by their reference counts). Ignore paths inside list items take the plain
        way."""
        body = request.get("body")
        names = self._body_ignores
        if not isinstance(body, dict) or names is None \
                or not all(isinstance(k, str) for k in body):
            return _sorted_json(self.canonical(request))
        canon = self.canonical({k: v for k, v in request.items() if k != "body"})
        canon.pop("body", None)
        rest = _sorted_json(canon)  # method, path, query: they sort after "body"
        parts = []
        for key in sorted(k for k in body if k not in names):
            value = body[key]
            if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
                text = "[" + ",".join(self._item_text(item) for item in value) + "]"
            else:
                text = _sorted_json(self._normalize(value) if self._regexes else value)
            parts.append(json.dumps(key, ensure_ascii=False) + ":" + text)
        head = '{"body":{' + ",".join(parts) + "}"
        return head + ("}" if rest == "{}" else "," + rest[1:])

    def _item_text(self, item: Any) -> str:
        try:
            key = marshal.dumps(item, 2)
        except ValueError:  # nested deeper than marshal goes: not remembered
            return _sorted_json(self._normalize(item) if self._regexes else item)
        texts = self._texts
        text = texts.get(key)
        if text is None:
            text = _sorted_json(self._normalize(item) if self._regexes else item)
            if self._texts_size[0] + len(key) + len(text) > _TEXTS_LIMIT:
                texts.clear()  # bounded: forgetting only costs a new serialisation
                self._texts_size[0] = 0
            texts[key] = text
            self._texts_size[0] += len(key) + len(text)
        return text

    def render(self, request: dict[str, Any]) -> list[str]:
        """The canonical request as ``path: value`` lines; multi-line strings one line each."""
        lines: list[str] = []
        _flatten(self.canonical(request), "", lines)
        return lines


_TEXTS_LIMIT = 32_000_000  # bytes of remembered item texts and their keys, per matcher


def _sorted_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def _flatten(value: Any, prefix: str, out: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append(f"{prefix}: {{}}")
        for key in sorted(value):
            _flatten(value[key], f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list):
        if not value:
            out.append(f"{prefix}: []")
        for i, item in enumerate(value):
            _flatten(item, f"{prefix}[{i}]", out)
    elif isinstance(value, str) and "\n" in value:
        # one line per text line, each naming its field, so a diff hunk is self-explaining
        out.extend(f"{prefix} | {line}" for line in value.split("\n"))
    else:
        out.append(f"{prefix}: {json.dumps(value, ensure_ascii=False, default=str)}")


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cheap closeness of two rendered requests: mostly the Jaccard index of their line
    sets, with ties broken by how alike (character counts) the differing lines are."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    only_a, only_b = "\n".join(sorted(sa - sb)), "\n".join(sorted(sb - sa))
    closeness = difflib.SequenceMatcher(None, only_a, only_b, autojunk=False).quick_ratio()
    return 0.9 * len(sa & sb) / len(sa | sb) + 0.1 * closeness


_MAX_LINE = 160
_MAX_DIFF_LINES = 60


def _clip_pair(old: str, new: str) -> tuple[str, str]:
    """Shorten a long changed line to a window around where it first differs."""
    if len(old) <= _MAX_LINE and len(new) <= _MAX_LINE:
        return old, new
    start = 0
    for start, (x, y) in enumerate(zip(old, new, strict=False)):  # noqa: B007
        if x != y:
            break
    lo = max(0, start - 60)

    def cut(s: str) -> str:
        piece = s[lo:lo + _MAX_LINE]
        return ("…" if lo else "") + piece + ("…" if lo + _MAX_LINE < len(s) else "")

    return cut(old), cut(new)


def unified_request_diff(
    recorded: Sequence[str], actual: Sequence[str], recorded_label: str, actual_label: str
) -> str:
    """A unified diff (2 lines of context) of two rendered requests, long lines clipped."""
    raw = list(difflib.unified_diff(list(recorded), list(actual), recorded_label, actual_label,
                                    n=2, lineterm=""))
    out: list[str] = []
    i = 0
    while i < len(raw):
        line = raw[i]
        if line.startswith("-") and not line.startswith("---"):
            minus = []
            while i < len(raw) and raw[i].startswith("-") and not raw[i].startswith("---"):
                minus.append(raw[i][1:])
                i += 1
            plus = []
            while i < len(raw) and raw[i].startswith("+") and not raw[i].startswith("+++"):
                plus.append(raw[i][1:])
                i += 1
            for k in range(max(len(minus), len(plus))):
                old = minus[k] if k < len(minus) else ""
                new = plus[k] if k < len(plus) else ""
                old, new = _clip_pair(old, new)
                if k < len(minus):
                    minus[k] = old
                if k < len(plus):
                    plus[k] = new
            out.extend("-" + m for m in minus)
            out.extend("+" + p for p in plus)
            continue
        if len(line) > _MAX_LINE + 2:
            line = line[: _MAX_LINE] + "…"
        out.append(line)
        i += 1
    if len(out) > _MAX_DIFF_LINES:
        hidden = len(out) - _MAX_DIFF_LINES
        out = [*out[:_MAX_DIFF_LINES], f"… ({hidden} more diff lines)"]
    return "\n".join(out)


# --------------------------------------------------------------------------- field diffs

#: diverging fields a report shows in full before it counts the rest (``-v`` shows all)
SHOWN_FIELDS = 3
_FIELD_OF = re.compile(r"^(.*?)(?:: | \| )")


def _field_of(line: str) -> str:
    """The field a rendered line belongs to (``body.messages[0].content``)."""
    match = _FIELD_OF.match(line)
    return match.group(1) if match else line


@dataclass(frozen=True)
class FieldChange:
    """One field that differs between two rendered values, with its own small diff (``-`` the
    recorded/old lines, ``+`` the new ones, a line of context inside a multi-line text)."""

    field: str
    lines: tuple[str, ...]


_INDEX = re.compile(r"\[(\d+)\]")


def _field_key(name: str) -> str:
    return _INDEX.sub(lambda m: f"[{int(m.group(1)):09d}]", name)


def _group(lines: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in lines:
        out.setdefault(_field_of(line), []).append(line)
    return out


def field_changes(old: Sequence[str], new: Sequence[str]) -> list[FieldChange]:
    """Every field whose rendered lines differ, in rendering order (keys sorted, list items
    by index). Each one's diff is its own: a changed date in the system prompt never hides a
    changed question further down. Message lists of different lengths are aligned first
    (``sequence_diff``): an inserted message is one change, with its text."""
    from hermes_replay._cassette.sequence_diff import sequence_changes

    aligned = sequence_changes(old, new, _positional_changes,
                               lambda name, lines: FieldChange(name, tuple(_clipped(list(lines)))))
    return aligned if aligned is not None else _positional_changes(old, new)


def _positional_changes(old: Sequence[str], new: Sequence[str]) -> list[FieldChange]:
    a, b = _group(old), _group(new)
    # both sides' fields in one order (rendering sorts keys; list indices compare as numbers)
    order = sorted(dict.fromkeys([*a, *b]), key=_field_key)
    out: list[FieldChange] = []
    for name in order:
        la, lb = a.get(name, []), b.get(name, [])
        if la == lb:
            continue
        body: list[str] = []
        for line in difflib.unified_diff(la, lb, n=1, lineterm=""):
            if line.startswith(("---", "+++", "@@")):
                continue
            body.append(line)
        out.append(FieldChange(name, tuple(_clipped(body))))
    return out


def _clipped(lines: list[str]) -> list[str]:
    """Long changed lines cut to a window around where the pair first differs."""
    out = list(lines)
    minus = [i for i, line in enumerate(out) if line.startswith("-")]
    plus = [i for i, line in enumerate(out) if line.startswith("+")]
    for i, j in zip(minus, plus, strict=False):
        old, new = _clip_pair(out[i][1:], out[j][1:])
        out[i], out[j] = "-" + old, "+" + new
    for k in range(len(out)):
        if len(out[k]) > _MAX_LINE + 2:
            out[k] = out[k][: _MAX_LINE] + "…"
    return out


_FIELD_LINES = 40  # lines of one field's diff before it is cut (unless verbose)


def field_report(changes: Sequence[FieldChange], *, verbose: bool = False,
                 shown: int = SHOWN_FIELDS, more_hint: str = "-v shows all") -> list[str]:
    """The diverging fields as a report: a count naming them, the first ``shown`` in full,
    the rest counted by name (``verbose``: every one)."""
    if not changes:
        return []
    from hermes_replay._cassette.sequence_diff import sequence_summary

    names = [c.field for c in changes]
    listed = ", ".join(names[:8]) + (" …" if len(names) > 8 else "")
    summary = sequence_summary(names)
    out = ([summary] if summary else []) + [f"{len(changes)} field(s) differ: {listed}"]
    show = list(changes) if verbose else list(changes[:shown])
    for change in show:
        lines = list(change.lines)
        if not verbose and len(lines) > _FIELD_LINES:
            lines = [*lines[:_FIELD_LINES], f"… {len(lines) - _FIELD_LINES} more line(s) of "
                     f"{change.field}"]
        out.extend(lines)
    rest = names[len(show):]
    if rest:
        out.append(f"… and {len(rest)} more field(s) differ: {', '.join(rest[:10])}"
                   f"{' …' if len(rest) > 10 else ''} ({more_hint})")
    return out
