"""Redaction: secrets never reach a cassette.

Applied to every request and response *before* it is fingerprinted or written, so a
recorded fingerprint and a replay-time fingerprint are computed over the same redacted
form (a key in a body therefore never breaks matching). Replay never needs a key.

Three layers: headers (a small allow-list is kept at all, and the secret ones are
replaced even if a caller widens the list), query parameters with key-like names, and
key-shaped patterns inside any string of a JSON body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "KEPT_HEADERS",
    "might_hold_secret",
    "needs_redaction",
    "redact_fields",
    "redact_headers",
    "redact_json",
    "redact_text",
    "redact_url",
]

# Headers worth keeping in a cassette: they change how a body is read. Everything else
# (user-agent, x-stainless-*, request ids, dates) is noise in a git diff.
KEPT_HEADERS = frozenset({"content-type", "accept"})

_SECRET_HEADERS = {
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

_SECRET_PARAMS = frozenset({
    "key", "api_key", "apikey", "api-key", "token", "access_token", "access-token", "auth",
    "auth_token", "refresh_token", "session_token", "id_token", "secret", "client_secret",
    "password", "passwd", "sig", "signature", "x-api-key",
})

# Keys whose string values are secrets wherever they appear in a JSON body (also with a
# prefix: ``openai_api_key``, ``hf_access_token``).
_SECRET_FIELD = re.compile(
    r"^(?:[a-z0-9]+[_-])*(api[_-]?key|apikey|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|session[_-]?token|id[_-]?token|secret|client[_-]?secret|password|"
    r"passwd|private[_-]?key|authorization)$",
    re.IGNORECASE,
)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Bearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer <redacted:token>"),
    (re.compile(r"\bsk-(?:ant-|proj-|or-v1-)?[A-Za-z0-9_-]{16,}"), "<redacted:api-key>"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "<redacted:hf-token>"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "<redacted:google-key>"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), "<redacted:github-token>"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "<redacted:slack-token>"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "<redacted:aws-key>"),
    (
        re.compile(r'("(?:api[_-]?key|access[_-]?token|secret|password)"\s*:\s*)"[^"]+"',
                   re.IGNORECASE),
        r'\1"<redacted:secret>"',
    ),
)


# Every rule above needs one of these substrings (compared lower-case, so broader than the
# rules). ``\\u`` sends JSON with escaped characters down the full path, since an escape could
# spell a key name or prefix that the raw text does not show. Plain ``in`` tests: a regex
# alternation with IGNORECASE scanned an 11 KB body at about 3 MB/s.
def _spellings(*stems: tuple[str, str]) -> tuple[str, ...]:
    return tuple(f"{a}{sep}{b}" for a, b in stems for sep in ("", "_", "-"))


_SECRET_MARKERS: tuple[str, ...] = (
    "bearer", "sk-", "hf_", "aiza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xoxa-", "xoxb-",
    "xoxp-", "xoxr-", "xoxs-", "akia", "\\u", "secret", "passw", "authorization",
    *_spellings(("api", "key"), ("access", "token"), ("auth", "token"), ("refresh", "token"),
                ("session", "token"), ("id", "token"), ("private", "key")),
)


def might_hold_secret(raw: str) -> bool:
    """False only when no redaction rule could change ``raw`` or the JSON it encodes.

    One pass over the raw text instead of every rule over every string: redaction was most
    of the cost of replaying a request.
    """
    low = raw.lower()
    for marker in _SECRET_MARKERS:  # a plain loop: a generator costs more than the tests
        if marker in low:
            return True
    return False


# Strings already found clean. An agent's request repeats the system prompt, the tool
# schemas and every earlier turn, so without this each request rescans all of them (40
# substring scans of a 20 KB body took 0.47 ms: most of what recording a request cost).
_CLEAN: dict[str, None] = {}
_CLEAN_LIMIT = 8_000_000  # characters remembered; emptied when full (that only costs rescans)
_clean_chars = [0]


def needs_redaction(value: Any) -> bool:
    """False only when ``redact_json(value)`` would return ``value`` unchanged.

    Looks at the parsed strings and keys (what the rules see, escapes resolved) and scans
    the ones not seen before in a single pass; strings found clean are remembered.
    """
    fresh: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item not in _CLEAN:
                fresh.append(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if key not in _CLEAN:
                    fresh.append(str(key))
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    if not fresh:
        return False
    # "\n" joins: no marker holds one, so no match can span two strings
    if might_hold_secret("\n".join(fresh)):
        return True
    size = sum(map(len, fresh))
    if _clean_chars[0] + size > _CLEAN_LIMIT:
        _CLEAN.clear()
        _clean_chars[0] = 0
    _CLEAN.update(dict.fromkeys(fresh))
    _clean_chars[0] += size
    return False


def redact_text(text: str) -> str:
    """Replace key-shaped substrings of ``text`` with placeholders."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_json(value: Any) -> Any:
    """A copy of a JSON value with secret fields and key-shaped strings replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, str) and item and _SECRET_FIELD.match(str(key)):
                out[key] = f"<redacted:{str(key).lower()}>"
            else:
                out[key] = redact_json(item)
        return out
    return value


_SECRET_FLAG = re.compile(r"^--?(?:[\w-]+\.)*[\w-]*(?:key|token|secret|password)$",
                          re.IGNORECASE)


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Cassette header fields: URLs as URLs, a recorded argv without flag values that are
    credentials (``--openai.api_key X``), everything else as JSON."""
    out = redact_json(fields)
    for key, value in list(out.items()):
        if key.endswith("url") and isinstance(value, str):
            out[key] = redact_url(value)
    command = out.get("command")
    if isinstance(command, list):
        argv = [str(a) for a in command]
        for i, arg in enumerate(argv):
            name, eq, _ = arg.partition("=")
            if not _SECRET_FLAG.match(name):
                continue
            if eq:
                argv[i] = f"{name}=<redacted>"
            elif i + 1 < len(argv):
                argv[i + 1] = "<redacted>"
        out["command"] = argv
    return out


def redact_headers(
    headers: Iterable[tuple[str, str]], keep: Iterable[str] = KEPT_HEADERS
) -> dict[str, str]:
    """Allow-listed headers (lower-cased names) plus placeholders for the secret ones.

    A placeholder (not a silent drop) shows a reviewer that a credential was sent.
    """
    kept = {k.lower() for k in keep}
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in _SECRET_HEADERS:
            out[low] = f"<redacted:{_SECRET_HEADERS[low]}>"
        elif low in kept:
            out[low] = redact_text(value)
    return out


def redact_url(url: str) -> str:
    """The URL with key-like query values and any userinfo replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "<redacted:userinfo>@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        pairs = [
            (k, f"<redacted:{k.lower()}>" if k.lower() in _SECRET_PARAMS else redact_text(v))
            for k, v in pairs
        ]
        query = urlencode(pairs, safe="<>:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
