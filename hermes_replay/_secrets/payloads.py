"""File payloads inside tool results: ``download_file`` records files as base64.

A reward's ``ctx.download_file``/``download_dir`` records what it copied out of a sandbox as
``{relative path: base64}``. Base64 hides every rule's shape (``sk-proj-…`` becomes
``c2stcHJvai0…``), so recording and ``verify`` decode each payload, look at its bytes as
text (latin-1: every byte one character, so binary files are scanned too and round-trip
exactly), scrub or report what the rules find, and recording encodes the scrubbed bytes again.

Bodies that are not UTF-8 are kept the same way, as ``{"base64": …}`` beside a response's
status (``_session.convert``): recording scrubs their bytes before encoding them, and
``verify`` and every display decode them again (``decoded_body``, ``scrub_body``), so a key
in a hand-made or older cassette's binary body is found too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["FILE_TOOLS", "decoded_body", "decoded_payloads", "scrub_body", "scrub_payloads"]

#: tools whose result is ``{relative path: base64 bytes}``
FILE_TOOLS = frozenset({"download_file"})


def decoded_payloads(name: Any, result: Any) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of each base64 file in the result of a file tool (latin-1 text)."""
    if name not in FILE_TOOLS or not isinstance(result, dict):
        return
    for path, data in result.items():
        if not isinstance(data, str):
            continue
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            continue
        yield str(path), raw.decode("latin-1")


def scrub_payloads(name: Any, result: Any, redact: Callable[[str], str]) -> Any:
    """``result`` with each file payload's secrets replaced (and encoded again)."""
    changed = {path: base64.b64encode(clean.encode("latin-1")).decode("ascii")
               for path, text in decoded_payloads(name, result)
               if (clean := redact(text)) != text}
    return {**result, **changed} if changed else result


def decoded_body(data: Any) -> str | None:
    """A stored ``base64`` body's bytes as latin-1 text, or None if it is not base64."""
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return None


def scrub_body(message: Any, redact: Callable[[str], str]) -> Any:
    """A stored request or response (``{"base64": …}``) with its body's secrets replaced."""
    if not isinstance(message, dict):
        return message
    text = decoded_body(message.get("base64"))
    if text is None or (clean := redact(text)) == text:
        return message
    encoded = base64.b64encode(clean.encode("latin-1", "replace")).decode("ascii")
    return {**message, "base64": encoded}
