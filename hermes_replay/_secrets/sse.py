"""Server-sent event streams, read the way a client reads them: the text deltas joined.

A key streamed by a model arrives in pieces (``"sk-pro"``, ``"j-Ab1…"``): no piece looks
like a key, the joined text does. Redaction and ``verify`` therefore join every delta
stream (per choice, per field, per tool call) before looking for secrets, and redaction
maps what it finds back onto the pieces: the first piece of a secret carries the
placeholder, the rest of the secret is cut from the following pieces. The stream keeps
its events; only events that held a secret are re-serialised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from hermes_replay._secrets.rules import Span

__all__ = ["delta_streams", "redact_events", "split_events"]

# The fields of a streamed chunk that carry text continued from the previous chunk.
_DELTA_TEXT = ("content", "reasoning_content", "reasoning", "refusal")


def split_events(text: str) -> list[str]:
    """SSE events, each with its terminating blank line, so joining them gives ``text``."""
    events: list[str] = []
    rest = text
    while rest:
        cut = rest.find("\n\n")
        if cut < 0:
            events.append(rest)
            break
        events.append(rest[: cut + 2])
        rest = rest[cut + 2:]
    return events


def _data_json(event: str) -> tuple[int, Any] | None:
    """(line index, parsed JSON) of the event's single ``data:`` line, if it is JSON."""
    lines = event.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload.startswith("{"):
                try:
                    return i, json.loads(payload)
                except ValueError:
                    return None
    return None


# A piece: (event index, the dict holding it, its key) — so it can be written back.
Piece = tuple[int, dict[str, Any], str]


def _pieces(index: int, data: Any) -> Iterator[tuple[tuple[Any, ...], Piece]]:
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list):
        return
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        n = choice.get("index", 0)
        if isinstance(choice.get("text"), str):  # /completions streams
            yield (n, "text"), (index, choice, "text")
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            continue
        for name in _DELTA_TEXT:
            if isinstance(delta.get(name), str):
                yield (n, name), (index, delta, name)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                yield (n, "tool", call.get("index", 0)), (index, fn, "arguments")


def delta_streams(events: list[str]) -> tuple[dict[int, tuple[int, Any]],
                                               dict[tuple[Any, ...], list[Piece]]]:
    """Parsed ``data:`` JSON per event, and the delta pieces of each stream in order."""
    parsed: dict[int, tuple[int, Any]] = {}
    streams: dict[tuple[Any, ...], list[Piece]] = {}
    for i, event in enumerate(events):
        found = _data_json(event)
        if found is None:
            continue
        parsed[i] = found
        for key, piece in _pieces(i, found[1]):
            streams.setdefault(key, []).append(piece)
    return parsed, streams


def joined(pieces: list[Piece]) -> str:
    return "".join(holder[key] for _, holder, key in pieces)


def _cut(pieces: list[Piece], spans: list[Span]) -> set[int]:
    """Rewrite the pieces so that their join has ``spans`` replaced; returns changed events."""
    changed: set[int] = set()
    offset = 0
    for index, holder, key in pieces:
        text = holder[key]
        start, end = offset, offset + len(text)
        offset = end
        out: list[str] = []
        pos = start
        touched = False
        for s, e, label in spans:
            if e <= start or s >= end:
                continue
            touched = True
            if s > pos:
                out.append(text[pos - start: s - start])
            if s >= start:  # the secret starts in this piece: it carries the placeholder
                out.append(label)
            pos = max(pos, min(e, end))
        if not touched:
            continue
        out.append(text[pos - start:])
        holder[key] = "".join(out)
        changed.add(index)
    return changed


def redact_events(text: str, find: Callable[[str], list[Span]],
                  redact_value: Callable[[Any], Any],
                  redact_line: Callable[[str], str]) -> list[str]:
    """The SSE stream ``text`` as events, with secrets in joined deltas, in chunk JSON and
    in any other line replaced."""
    events = split_events(text)
    parsed, streams = delta_streams(events)
    changed: set[int] = set()
    for pieces in streams.values():
        spans = find(joined(pieces))
        if spans:
            changed |= _cut(pieces, spans)
    out: list[str] = []
    for i, event in enumerate(events):
        if i not in parsed:
            out.append(redact_line(event))
            continue
        line_no, data = parsed[i]
        cleaned = redact_value(data)
        if i not in changed and cleaned == data:
            out.append(redact_line(event))
            continue
        lines = event.split("\n")
        lines[line_no] = "data: " + json.dumps(cleaned, ensure_ascii=False,
                                               separators=(",", ":"))
        out.append(redact_line("\n".join(lines)))
    return out
