"""Encode a long text in bounded pieces, with exactly the ids one ``encode`` call would give.

Why: a fast tokenizer's ``encode`` builds, per token, an id, a token string, offsets and
masks in Rust, and transformers converts three of those to Python lists; a 5 MB model reply
peaked at about 150 MB of memory per MB of text. Encoding bounded pieces and keeping only
their ids makes the memory a few bytes per token and the time linear in the text.

Exactness: a cut is only taken where the tokenizer itself shows it changes nothing around it.
For a candidate cut ``c`` we encode the window ``text[c-V:c+V]`` whole and as its two halves;
the cut is taken only if the halves' ids, joined, equal the window's ids. A cut inside a
special token, inside a merged word, between a letter and a combining mark a normalizer would
join, or before a chunk start that a pre-tokenizer would prefix with a space marker, fails that
test and another candidate is tried. It is a check, not a proof: a tokenizer whose split at
``c`` depended on text more than ``V`` characters away would pass it. The pre-tokenizers of
BPE and SentencePiece models look at neighbouring characters only, and the tests compare with
one whole encode on texts built to break cuts. Where no candidate passes (a long text with no
word boundary, e.g. megabytes of one CJK run, or a tokenizer with a whole-text normalizer), the
piece simply grows until one does, up to the whole text: only the memory bound is lost.
Candidates are places where the kind of character changes (space, letter, digit, other),
starts of whitespace runs first, because those are where pre-tokenizers split.

Only a ``PreTrainedTokenizerFast`` without truncation, padding or ``split_special_tokens`` is
encoded in pieces; any other tokenizer gets its own ``encode`` on the whole text.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import Any

CHUNK = 1 << 16  # characters per encode call; the memory bound is a few times this
WINDOW = 512  # characters each side of a candidate cut that must encode the same split or not
SEARCH = 4096  # how far back from the chunk end to look for candidate cuts
TRIES = 8  # candidates verified per chunk before the chunk is allowed to grow


def _kind(ch: str) -> int:
    if ch.isspace():
        return 0
    if ch.isalpha():
        return 1
    if ch.isdigit():
        return 2
    return 3


def _candidates(text: str, lo: int, hi: int) -> list[int]:
    """Possible cuts in ``(lo, hi]``, nearest to ``hi`` first, whitespace-run starts first."""
    starts: list[int] = []
    changes: list[int] = []
    for c in range(hi, lo, -1):
        before, after = text[c - 1], text[c]
        kind = _kind(after)
        if kind == _kind(before) or unicodedata.combining(after):
            continue
        (starts if kind == 0 else changes).append(c)
        if len(starts) >= TRIES:
            break
    return (starts + changes)[:TRIES]


def _backend(tokenizer: Any) -> Any | None:
    """The ``tokenizers.Tokenizer`` whose ids equal ``tokenizer.encode``'s, or None."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(tokenizer, "is_fast", False):
        return None
    if getattr(tokenizer, "split_special_tokens", False):
        return None  # transformers flips the backend's special-token handling per call
    if backend.truncation is not None or backend.padding is not None:
        return None  # a backend-level limit would cut each piece, not the whole text
    return backend


def _ids(backend: Any, text: str) -> list[int]:
    return backend.encode(text, add_special_tokens=False).ids if text else []


def _safe_cut(backend: Any, text: str, lo: int, hi: int) -> int | None:
    """A cut in ``(lo, hi]`` whose window encodes to the same ids whole and split, if any."""
    for c in _candidates(text, lo, hi):
        left, right = text[max(0, c - WINDOW):c], text[c:c + WINDOW]
        if _ids(backend, left) + _ids(backend, right) == _ids(backend, left + right):
            return c
    return None


def pieces(backend: Any, text: str, chunk: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of the pieces ``text`` is encoded in; each cut verified as above."""
    start, target = 0, chunk
    while start < len(text):
        if target >= len(text) or len(text) - start <= chunk + chunk // 2:
            yield start, len(text)
            return
        lo = max(start + 1, target - min(SEARCH, chunk // 2))
        cut = _safe_cut(backend, text, lo, target)
        if cut is None:
            target += chunk  # no verified cut here: let this piece grow
            continue
        yield start, cut
        start, target = cut, cut + chunk


def encode_ids(tokenizer: Any, text: str, chunk: int | None = None) -> list[int]:
    """``tokenizer.encode(text, add_special_tokens=False)``, in bounded memory where it can be.

    ``chunk`` is the target piece size in characters (default :data:`CHUNK`; tests make it
    small to force many cuts).
    """
    chunk = chunk or CHUNK
    if not text:
        return []
    backend = _backend(tokenizer)
    if backend is None or len(text) <= chunk + chunk // 2:
        return list(tokenizer.encode(text, add_special_tokens=False))
    # One shared int object per vocabulary id: a list of ids then costs 8 bytes per token,
    # not 8 + 28 for a fresh int each (CPython caches only the ints up to 256).
    ints = list(range(backend.get_vocab_size(with_added_tokens=True)))
    out: list[int] = []
    for start, end in pieces(backend, text, chunk):
        ids = _ids(backend, text[start:end])
        out.extend(map(ints.__getitem__, ids) if ids and max(ids) < len(ints) else ids)
    return out
