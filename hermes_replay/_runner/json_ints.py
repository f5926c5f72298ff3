"""A JSON decoder that hands back one int object per distinct number.

Token ids and masks are most of a ``groups.jsonl`` line; decoded the usual way each number
becomes a fresh int (36 bytes with its list slot, since CPython caches only -5..256). With
one shared object per distinct value a number costs its list slot, 8 bytes, and decoding is
no slower.
"""

from __future__ import annotations

import json

__all__ = ["shared_int_decoder"]


class _SharedInts(dict):
    def __missing__(self, digits: str) -> int:
        value = self[digits] = int(digits)
        return value


def shared_int_decoder() -> json.JSONDecoder:
    """A fresh ``json.JSONDecoder`` whose equal ints are one object (for one file's lines)."""
    return json.JSONDecoder(parse_int=_SharedInts().__getitem__)
