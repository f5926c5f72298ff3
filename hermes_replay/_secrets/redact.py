"""Redaction: secrets never reach a cassette (or any other file hermes-replay writes).

Applied to every request and response *before* it is fingerprinted or written, so a
recorded fingerprint and a replay-time fingerprint are computed over the same redacted
form (a key in a body therefore never breaks matching). Replay never needs a key.

What is secret is decided by ``_secrets.rules`` (names, shapes) and ``_secrets.known``
(values known to be secret) — the same rules ``verify`` uses. Everything redacted *by
name* (a header, a query parameter, a JSON field, a flag) is also registered as a known
value, so the same key echoed anywhere later (a response body, a tool's output) is gone too.

Public entry point: ``scrub(value)`` — any string or JSON value, e.g. a tool result.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.rules import (
    apply_spans,
    is_placeholder,
    is_secret_name,
    might_hold_secret,
    scalars_only,
    secret_spans,
)

__all__ = [
    "KEPT_HEADERS",
    "CleanBodies",
    "is_credential_header",
    "might_hold_secret",
    "needs_redaction",
    "redact_argv",
    "redact_bytes",
    "redact_fields",
    "redact_headers",
    "redact_json",
    "redact_text",
    "redact_url",
    "scrub",
]

# Headers worth keeping in a cassette: they change how a body is read. Everything else
# (user-agent, x-stainless-*, request ids, dates) is noise in a git diff.
KEPT_HEADERS = frozenset({"content-type", "accept"})

# Placeholder labels of the well-known credential headers (others use their own name).
_HEADER_LABELS = {
    "authorization": "authorization",
    "proxy-authorization": "authorization",
    "api-key": "api-key",
    "x-api-key": "api-key",
    "x-goog-api-key": "api-key",
    "openai-organization": "organization",
    "openai-project": "project",
    "cookie": "cookie",
    "set-cookie": "cookie",
}
REDACTED = "<redacted>"


def redact_text(text: str) -> str:
    """``text`` with every secret (shape, name=value, known value) replaced by a placeholder."""
    if not might_hold_secret(text) and not KNOWN.might_occur(text):
        return text
    spans = secret_spans(text, KNOWN.spans)
    return apply_spans(text, spans) if spans else text


def redact_bytes(data: bytes) -> bytes:
    """Bytes that are not UTF-8 text (a Latin-1 error page echoing the key, a binary body)
    with every secret replaced, read as Latin-1: each byte one character, so an ASCII key
    inside is seen by every rule and the other bytes come back exactly as they were."""
    text = data.decode("latin-1")
    clean = redact_text(text)
    return data if clean == text else clean.encode("latin-1", "replace")


def _secret_leaves(value: Any) -> Any:
    """Everything under a credential-named field is secret (``"auth": {"pwd": …}``)."""
    if isinstance(value, str):
        if not value or is_placeholder(value):
            return value
        KNOWN.add(value, "credential")
        return "<redacted:credential>"
    if isinstance(value, list):
        return [_secret_leaves(v) for v in value]
    if isinstance(value, dict):
        return {k: _secret_leaves(v) for k, v in value.items()}
    return value


def redact_json(value: Any) -> Any:
    """A copy of a JSON value with credential fields and secret substrings replaced."""
    if isinstance(value, str):
        return _redact_string(value)
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if is_secret_name(str(key), "field") and isinstance(item, (str, dict, list)):
                if isinstance(item, str):
                    if item and not is_placeholder(item):
                        KNOWN.add(item, str(key).lower())
                        item = f"<redacted:{str(key).lower()}>"
                    out[key] = item
                else:
                    out[key] = _secret_leaves(item)
            else:
                out[key] = redact_json(item)
        return out
    return value


def scrub(value: Any) -> Any:
    """A copy of any string or JSON value with every secret replaced: credential-named
    fields, key shapes, ``NAME=value`` pairs, URL passwords, and every value this process
    knows is secret (the recorder's API key, redacted headers, credential environment
    variables). Call it on anything about to be written: a tool result, a log line, an
    output record. Idempotent: scrubbing a scrubbed value changes nothing."""
    return redact_json(value)


# Strings already found clean, for the current set of known values. An agent's request
# repeats the system prompt, the tool schemas and every earlier turn, so without this each
# request rescans all of them.
_CLEAN: dict[str, None] = {}
_CLEAN_LIMIT = 8_000_000  # characters remembered; emptied when full (that only costs rescans)
_clean_state = [0, -1]  # [characters remembered, KNOWN.generation they were checked against]


def _current_clean() -> dict[str, None]:
    """``_CLEAN``, emptied first if a value became known since (it can make old strings
    dirty)."""
    if _clean_state[1] != KNOWN.generation:
        _CLEAN.clear()
        _clean_state[:] = [0, KNOWN.generation]
    return _CLEAN


def _remember_clean(strings: list[str]) -> None:
    size = sum(map(len, strings))
    if _clean_state[0] + size > _CLEAN_LIMIT:
        _CLEAN.clear()
        _clean_state[0] = 0
    _CLEAN.update(dict.fromkeys(strings))
    _clean_state[0] += size


def _redact_string(text: str) -> str:
    """``redact_text`` of a JSON string, remembering the clean ones: once a turn holds one
    string with a marker word ("token", "key", "pass"), ``redact_json`` walks the whole request,
    and the conversation it repeats was already found clean, string by string. A string is
    remembered only when the full rules left it unchanged, and forgotten when a value becomes
    known, so the result is always what the rules give."""
    if text in _current_clean():
        return text
    out = redact_text(text)
    if out == text:
        _remember_clean([text])
    return out


def needs_redaction(value: Any, clean: Any = None) -> bool:
    """False only when ``redact_json(value)`` would return ``value`` unchanged.

    ``clean``: a value this returned False for under the secrets known now (``CleanBodies``).
    The leading items of each of ``value``'s top-level lists that equal ``clean``'s are not
    walked again: an agent's turn repeats the whole conversation so far, and the walk of it,
    string by string, was most of what recording a long rollout's request cost. Equal items
    hold equal strings under equal keys (``==`` never equates a string with anything else),
    so skipping them changes no answer."""
    _current_clean()  # a new known value can make old strings dirty
    fresh: list[str] = []
    if isinstance(value, dict) and isinstance(clean, dict):
        value = {key: _new_items(child, clean.get(key)) for key, child in value.items()}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item not in _CLEAN:
                fresh.append(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if is_secret_name(str(key), "field") and isinstance(child, (str, dict, list)):
                    return True
                stack.append(child)
        elif isinstance(item, list) and not scalars_only(item):  # token ids hold no string
            stack.extend(item)
    if not fresh:
        return False
    joined = "\n".join(fresh)  # no rule spans a newline-free marker across two strings
    if might_hold_secret(joined) or KNOWN.might_occur(joined):
        # A marker word ("token", "key", "signal") is common in agent traffic and seldom a
        # secret. Judge the new strings by the full rules here, one by one, as
        # ``redact_json`` would: if none changes, the body is kept as it is, instead of
        # copied whole by ``redact_json`` only to find the same (most of a recorded
        # request's redaction cost). The clean ones are remembered either way.
        clean: list[str] = []
        for text in dict.fromkeys(fresh):
            if redact_text(text) != text:
                _remember_clean(clean)
                return True
            clean.append(text)
        fresh = clean
    _remember_clean(fresh)
    return False


def _new_items(child: Any, old: Any) -> Any:
    """``child`` without the leading items it shares (``==``) with ``old``."""
    if not isinstance(child, list) or not isinstance(old, list):
        return child
    same = 0
    for new_item, old_item in zip(child, old, strict=False):
        if new_item is not old_item and new_item != old_item:
            break
        same += 1
    return child[same:]


class CleanBodies:
    """The last body of each rollout that needed no redaction (``needs_redaction``'s
    ``clean``), kept only while no new secret becomes known: one may make old strings
    dirty. Holds references only (a recorder keeps the bodies it stored anyway)."""

    def __init__(self) -> None:
        self._last: dict[Any, tuple[int, Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._last.get(key)
        return entry[1] if entry is not None and entry[0] == KNOWN.generation else None

    def put(self, key: Any, body: Any) -> None:
        self._last[key] = (KNOWN.generation, body)


def redact_url(url: str) -> str:
    """The URL with userinfo, credential query values and secret substrings replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        KNOWN.add_userinfo(url)
        netloc = "<redacted:userinfo>@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = []
        for k, v in parse_qsl(query, keep_blank_values=True):
            if is_secret_name(k, "query") and not is_placeholder(v):
                KNOWN.add(v, k.lower())
                pairs.append((k, f"<redacted:{k.lower()}>"))
            else:
                pairs.append((k, redact_text(v)))
        query = urlencode(pairs, safe="<>:")
    return urlunsplit((parts.scheme, netloc, redact_text(parts.path), query,
                       redact_text(parts.fragment)))


def is_credential_header(name: str) -> bool:
    """A header whose value is a credential (``authorization``, ``cookie``,
    ``x-goog-api-key``, ``x-auth-token``, ``x-judge-secret`` …): the recorder stores a
    placeholder for it, and a live call never forwards it."""
    low = name.lower()
    return low in _HEADER_LABELS or is_secret_name(low, "header")


def redact_headers(
    headers: Iterable[tuple[str, str]], keep: Iterable[str] = KEPT_HEADERS
) -> dict[str, str]:
    """Allow-listed headers (lower-cased names) plus placeholders for the credential ones.

    A placeholder (not a silent drop) shows a reviewer that a credential was sent; the value
    becomes a known secret, so an echo of it in a body is scrubbed too.
    """
    kept = {k.lower() for k in keep}
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if is_credential_header(low):
            KNOWN.add_header(low, value)
            out[low] = f"<redacted:{_HEADER_LABELS.get(low, low)}>"
        elif low in kept:
            out[low] = redact_text(value)
    return out


def _flag_name(arg: str) -> str:
    return arg.lstrip("-").split(".")[-1]


def redact_argv(argv: Iterable[Any]) -> list[str]:
    """A command line with credential flag values (``--openai.api_key X``,
    ``--env.judge_token=X``), URL passwords and secret substrings replaced."""
    args = [str(a) for a in argv]
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            hide_next = False
            if not arg.startswith("--"):
                KNOWN.add(arg, "flag")
                out.append(REDACTED)
                continue
        name, eq, value = arg.partition("=")
        if name.startswith("-") and is_secret_name(_flag_name(name), "flag"):
            if eq:
                KNOWN.add(value, "flag")
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_url(arg) if "://" in arg and "@" in arg else redact_text(arg))
    return out


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Cassette header fields: URLs as URLs, the recorded argv as an argv, the rest as JSON."""
    command = fields.get("command")
    out = redact_json({k: v for k, v in fields.items() if k != "command"})
    for key, value in list(out.items()):
        if key.endswith("url") and isinstance(value, str):
            out[key] = redact_url(value)
    if isinstance(command, list):
        out["command"] = redact_argv(command)
    elif command is not None:
        out["command"] = redact_json(command)
    return out
