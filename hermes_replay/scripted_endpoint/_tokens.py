"""Token accounting for the scripted endpoint, through the project tokenizer when it is there.

``usage`` counts, chat/completions logprobs and ``max_tokens`` truncation use the project tokenizer
(``hermes_replay._tokenizers.bundled.load_tokenizer``) if it can be loaded, and whitespace pieces
otherwise.
``/generate`` needs real token ids and therefore the tokenizer; without it, it answers 501.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_PIECE = re.compile(r"\s*\S+|\s+$")


@functools.lru_cache(maxsize=1)
def get_tokenizer() -> Any | None:
    try:
        from hermes_replay._tokenizers.bundled import load_tokenizer
    except ImportError:
        return None
    try:
        return load_tokenizer()
    except (OSError, ValueError):
        return None


def require_tokenizer() -> Any:
    tok = get_tokenizer()
    if tok is None:
        raise TokenizerUnavailable(
            "scripted endpoint: /generate needs the project tokenizer "
            "(hermes_replay._tokenizers.bundled.load_tokenizer) and it could not be loaded; "
            "build it with the tokenizer script, or use /v1/chat/completions instead"
        )
    return tok


class TokenizerUnavailable(RuntimeError):
    """The project tokenizer is missing; raised only where real token ids are required."""


def pieces(text: str) -> list[str]:
    """The text split into tokens (strings that concatenate back to ``text``)."""
    if not text:
        return []
    tok = get_tokenizer()
    if tok is None:
        return _PIECE.findall(text)
    ids = tok.encode(text, add_special_tokens=False)
    out: list[str] = []
    start = 0
    # Decode from the last character boundary only (decoding growing prefixes of the whole
    # text is quadratic: about a minute for a 40 KB reply). A token that ends inside a
    # multi-byte character gets "" and the token that completes it gets the character.
    for i in range(len(ids)):
        piece = tok.decode(ids[start:i + 1])
        if piece.endswith("\ufffd") and i + 1 < len(ids):
            out.append("")
            continue
        out.append(piece)
        start = i + 1
    return out


def count(text: str) -> int:
    if not text:
        return 0
    tok = get_tokenizer()
    if tok is None:
        return len(_PIECE.findall(text))
    return len(tok.encode(text, add_special_tokens=False))


def truncate(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """``text`` cut to ``max_tokens`` tokens; the flag says whether anything was cut."""
    if max_tokens is None:
        return text, False
    parts = pieces(text)
    if len(parts) <= max_tokens:
        return text, False
    return "".join(parts[:max_tokens]), True
