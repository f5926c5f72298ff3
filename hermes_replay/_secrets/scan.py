"""Secret scanning for ``verify``: the redaction rules (``_secrets.rules``), applied to find
instead of replace, and reported without printing the value.

Every rule the recorder redacts with is a finding here — names (fields, query parameters,
headers, flags, ``NAME=value`` in text), shapes (provider keys, JWTs, PEM keys, URL
passwords), joined SSE deltas, and the values of credential-named environment variables
of the process running ``verify`` — so a cassette ``record`` wrote verifies clean and a
hand-planted secret does not. On top, long high-entropy tokens in header and query
positions are reported (a credential under a name no rule knows); message text, ids and
token lists are data and are not judged by entropy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.payloads import decoded_body
from hermes_replay._secrets.rules import (
    entropy,
    is_placeholder,
    is_secret_name,
    might_hold_secret,
    scalars_only,
    secret_spans,
)
from hermes_replay._secrets.sse import delta_streams, joined, split_events

__all__ = ["scan_command", "scan_string", "scan_value"]

_HEADER_CREDENTIALS = frozenset({"authorization", "proxy-authorization", "api-key",
                                 "x-api-key", "x-goog-api-key", "cookie", "set-cookie"})
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.~]{24,}")


def _high_entropy_token(value: str) -> str | None:
    """A long random-looking token (letters and digits mixed, near-uniform characters)."""
    for match in _TOKEN.finditer(value):
        token = match.group(0)
        if token.startswith("<redacted"):
            continue
        has_digit = any(c.isdigit() for c in token)
        has_alpha = any(c.isalpha() for c in token)
        hexish = all(c in "0123456789abcdefABCDEF" for c in token)
        limit = 3.3 if hexish else 4.0
        if has_digit and has_alpha and entropy(token) >= limit:
            return token
    return None


def _mask(secret: str) -> str:
    return f"{secret[:4]!r}… ({len(secret)} chars)"


def _label(placeholder: str) -> str:
    inner = placeholder.rsplit("<redacted:", 1)[-1].rstrip(">")
    return {"token": "bearer token", "userinfo": "password in a URL",
            "basic-auth": "HTTP Basic credentials"}.get(inner, inner.replace("-", " "))


def scan_string(text: str, where: str, credential_slot: bool) -> Iterator[str]:
    """The first secret in ``text`` (by the redaction rules), else — in a credential slot
    — a long high-entropy token."""
    # the prefilter redaction uses: False only when no rule and no known value can match
    hit = might_hold_secret(text) or KNOWN.might_occur(text)
    spans = secret_spans(text, KNOWN.spans) if hit else []
    if spans:
        start, end, placeholder = spans[0]
        yield f"{_label(placeholder)} in {where}: {_mask(text[start:end])}"
        return
    if credential_slot:
        token = _high_entropy_token(text)
        if token is not None:
            yield f"high-entropy token in {where}: {_mask(token)}"


def _scan_url(url: str, where: str) -> Iterator[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if "@" in parts.netloc and not parts.netloc.startswith("<redacted"):
        yield f"credentials in the URL's user-info in {where}"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        slot = f"{where} query parameter {name!r}"
        if is_secret_name(name, "query") and not is_placeholder(value):
            yield f"credential query parameter in {slot}: {_mask(value)}"
        else:
            yield from scan_string(value, slot, credential_slot=True)


# a multipart body's boundary: random by design, and no credential
_BOUNDARY = re.compile(r"(?i)(;\s*boundary=)(\"[^\"]*\"|[^;\s]+)")


def _scan_headers(headers: dict[str, Any], where: str) -> Iterator[str]:
    for name, value in headers.items():
        if not isinstance(value, str):
            continue
        slot = f"{where}.{name}"
        low = str(name).lower()
        if (low in _HEADER_CREDENTIALS or is_secret_name(low, "header")) \
                and not is_placeholder(value):
            yield f"credential header {slot}: {_mask(value)}"
        else:
            if low == "content-type":  # the boundary is not judged by entropy
                value = _BOUNDARY.sub(r"\1", value)
            yield from scan_string(value, slot, credential_slot=True)


def _scan_chunks(chunks: list[Any], where: str) -> Iterator[str]:
    """Each event, then every delta stream joined (a key streamed in pieces)."""
    events = [c for c in chunks if isinstance(c, str)]
    for i, event in enumerate(events):
        yield from scan_string(event, f"{where}[{i}]", credential_slot=False)
    _, streams = delta_streams(split_events("".join(events)))
    for key, pieces in streams.items():
        found = list(scan_string(joined(pieces), f"{where} (deltas of choice {key[0]} "
                                 f"{'/'.join(map(str, key[1:]))}, joined)", False))
        yield from found


def _secret_leaves(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, str):
        if value and not is_placeholder(value):
            yield f"credential field {where}: {_mask(value)}"
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _secret_leaves(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _secret_leaves(item, f"{where}.{key}")


def scan_value(value: Any, where: str = "") -> Iterator[str]:
    """Secret descriptions found anywhere in a JSON value (``where`` is its JSON location)."""
    if isinstance(value, str):
        yield from scan_string(value, where or "value", credential_slot=False)
        if where.endswith("url") and "://" in value:
            yield from _scan_url(value, where)
    elif isinstance(value, list):
        if scalars_only(value):  # a token-id or logprob list: nothing a rule can match
            return
        for i, item in enumerate(value):
            if isinstance(item, (str, list, dict)):  # numbers, booleans, nulls hold none
                yield from scan_value(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(item, (str, list, dict)):
                continue
            slot = f"{where}.{key}" if where else str(key)
            if key == "headers" and isinstance(item, dict):
                yield from _scan_headers(item, slot)
            elif key == "chunks" and isinstance(item, list):
                yield from _scan_chunks(item, slot)
            elif key == "base64" and (text := decoded_body(item)) is not None:
                # a body that is not UTF-8, decoded: base64 hides every shape
                yield from scan_string(text, f"{slot} (decoded)", credential_slot=False)
                yield from scan_value(item, slot)
            elif is_secret_name(str(key), "field") and isinstance(item, (str, list, dict)):
                yield from _secret_leaves(item, slot)
            else:
                yield from scan_value(item, slot)


def scan_command(command: Any) -> Iterator[str]:
    """A recorded argv: credential flags (``--openai.api_key X``, ``--env.judge_token=X``),
    URL passwords and key shapes in any argument."""
    if not isinstance(command, list):
        return
    args = [str(a) for a in command]
    skip = -1
    for i, arg in enumerate(args):
        if i == skip:
            continue
        name, eq, value = arg.partition("=")
        if name.startswith("-") and is_secret_name(name.lstrip("-").split(".")[-1], "flag"):
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                if value.startswith("--"):
                    continue
                skip = i + 1
            if not is_placeholder(value):
                yield f"credential on the recorded command line ({name}): {_mask(value)}"
            continue
        yield from scan_string(arg, f"the recorded command line (argument {i + 1})", False)
