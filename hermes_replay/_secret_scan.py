"""Secret scanning for ``verify``: where in a cassette a credential can hide, and how to
recognise one without printing it.

Detection is broader than redaction (``_redact``) on purpose: redaction must not damage
data a replay needs, while a reviewer would rather see one false alarm than miss a key.
Entropy is judged only where a credential can sit (headers, query strings, key-named
fields); message text, ids and token lists are data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["scan_command", "scan_string", "scan_value"]

_KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("API key (sk-…)", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("bearer token", re.compile(r"\bBearer\s+(?!<redacted)[A-Za-z0-9._~+/=-]{8,}")),
    ("Hugging Face token (hf_…)", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("Google API key (AIza…)", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("AWS access key id", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
)
# Names whose value is a credential wherever they appear (headers, query, JSON fields).
_SECRET_NAME = re.compile(
    r"^(authorization|proxy-authorization|x-api-key|api-key|x-goog-api-key|cookie|set-cookie|"
    r"api[_-]?key|apikey|key|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|"
    r"token|auth|secret|client[_-]?secret|password|passwd|private[_-]?key|signature|sig|"
    r"x-amz-security-token|session[_-]?token)$",
    re.IGNORECASE,
)
# ... and the same with a prefix (``openai_api_key``, ``hf_access_token``); bare ``token`` /
# ``key`` with a prefix (``eos_token``, ``cache_key``) are data.
_PREFIXED_SECRET = re.compile(
    r"^(?:[a-z0-9]+[_-])+(api[_-]?key|apikey|access[_-]?token|auth[_-]?token|"
    r"refresh[_-]?token|session[_-]?token|client[_-]?secret|secret|password|passwd|"
    r"private[_-]?key)$",
    re.IGNORECASE,
)
# JSON fields named "token" are LLM data (logprobs entries), not credentials.
_DATA_FIELDS = frozenset({"token", "key", "signature", "sig"})


def _is_secret_field(name: str) -> bool:
    if name.lower() in _DATA_FIELDS:
        return False
    return bool(_SECRET_NAME.match(name) or _PREFIXED_SECRET.match(name))
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.~]{24,}")


def _is_placeholder(value: str) -> bool:
    text = value.strip()
    return (not text or text.startswith("<redacted") or text.lower() in
            ("bearer <redacted:token>", "<redacted>", "redacted", "***", "none", "null"))


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


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
        if has_digit and has_alpha and _entropy(token) >= limit:
            return token
    return None


def _mask(secret: str) -> str:
    return f"{secret[:4]!r}… ({len(secret)} chars)"


def scan_string(text: str, where: str, credential_slot: bool) -> Iterator[str]:
    for label, pattern in _KEY_PATTERNS:
        match = pattern.search(text)
        if match:
            yield f"{label} in {where}: {_mask(match.group(0))}"
            return
    if credential_slot:
        token = _high_entropy_token(text)
        if token is not None:
            yield f"high-entropy token in {where}: {_mask(token)}"


def _scan_url(url: str, where: str) -> Iterator[str]:
    parts = urlsplit(url)
    if "@" in parts.netloc and not parts.netloc.startswith("<redacted"):
        yield f"credentials in the URL's user-info in {where}"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        slot = f"{where} query parameter {name!r}"
        if _SECRET_NAME.match(name) and not _is_placeholder(value):
            yield f"credential query parameter in {slot}: {_mask(value)}"
        else:
            yield from scan_string(value, slot, credential_slot=True)


def _scan_headers(headers: Any, where: str) -> Iterator[str]:
    items = headers.items() if isinstance(headers, dict) else []
    for name, value in items:
        if not isinstance(value, str):
            continue
        slot = f"{where}.{name}"
        if _SECRET_NAME.match(str(name)) and not _is_placeholder(value):
            yield f"credential header {slot}: {_mask(value)}"
        else:
            yield from scan_string(value, slot, credential_slot=True)


def scan_value(value: Any, where: str = "") -> Iterator[str]:
    """Secret descriptions found anywhere in a JSON value (``where`` is its JSON location)."""
    if isinstance(value, str):
        yield from scan_string(value, where or "value", credential_slot=False)
        if where.endswith(("url", "base_url")) and "://" in value:
            yield from _scan_url(value, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from scan_value(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            slot = f"{where}.{key}" if where else str(key)
            if key == "headers" and isinstance(item, dict):
                yield from _scan_headers(item, slot)
                continue
            secret_name = _is_secret_field(str(key))
            if isinstance(item, str) and secret_name and not _is_placeholder(item):
                yield f"credential field {slot}: {_mask(item)}"
                continue
            yield from scan_value(item, slot)


def scan_command(command: Any) -> Iterator[str]:
    """``--openai.api_key sk-…`` / ``--x.api_key=…`` in a recorded argv."""
    if not isinstance(command, list):
        return
    args = [str(a) for a in command]
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        flag = name.lstrip("-").split(".")[-1]
        if not name.startswith("--") or not _SECRET_NAME.match(flag):
            continue
        value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
        if not _is_placeholder(value) and value != "REDACTED":
            yield f"credential on the recorded command line ({name}): {_mask(value)}"
