"""Compact encoding of request bodies: per-rollout deltas and content-addressed blobs.

Why: an agent's turn-N request repeats the whole conversation of turns 0..N-1, so storing
requests verbatim makes a cassette grow with the square of the number of turns, and the
tool schemas / system prompt are repeated in every request of every rollout.

- A top-level body value that is a list or a string (``messages``, ``prompt``, token id
  lists — and one level deeper, for vLLM's ``{"prompt": {"prompt_token_ids": [...]}}``)
  which extends the same value of the previous request of the same rollout is stored as
  ``{"$delta": {"prev": <seq>, "keep": <prefix length>, "append": <the rest>}}``.
- Long strings and tool lists are stored once per file in a ``{"type": "blob"}`` record and
  referenced as ``{"$blob": "<sha256/16>"}``.

Decoding is the exact inverse. (A body that itself contains a one-key dict named
``$blob`` or ``$delta`` is not representable; no LLM API sends one.)
"""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Callable
from typing import Any

__all__ = ["BodyDecoder", "BodyEncoder", "DecodeError", "blob_id"]

BLOB_MIN_CHARS = 400       # strings at least this long are stored once, by hash
BLOB_KEYS = ("tools", "functions")  # top-level body keys stored once as a whole
_MIN_STRING_KEEP = 64      # a string delta is worth it only past this shared prefix


class DecodeError(ValueError):
    """A marker refers to something the file does not contain."""


def blob_id(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _is_marker(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("$blob", "$delta")


def _common_prefix(a: Any, b: Any) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class BodyEncoder:
    """Stateful: remembers blobs already written and the last body of each rollout.

    ``shared`` (used by ``hermes-replay compact``): shorter strings that are also stored once,
    because they occur more than once in the file; with it, response bodies are encoded too
    (an assistant reply recurs in the next request of its rollout).
    """

    def __init__(self, shared: frozenset[str] = frozenset()) -> None:
        self.shared = shared
        self._blobs: set[str] = set()
        self._last: dict[str, tuple[int, Any]] = {}
        # a request repeats long strings of earlier turns (system prompt, tool output): their
        # ids are remembered, not rehashed. Lists (the tool schemas, sent with every request)
        # by their ``marshal`` bytes, not by ``==``, which says True == 1 where JSON does not.
        self._string_ids: dict[str, str] = {}
        self._list_ids: dict[bytes, str] = {}

    def encode(self, rollout: str | None, seq: int, body: Any) -> tuple[list[dict], Any]:
        """Returns ``(new blob records, encoded body)``; blob records must precede the body."""
        new_blobs: list[dict] = []
        encoded = body
        if rollout is not None and isinstance(body, dict):
            prev = self._last.get(rollout)
            if prev is not None and isinstance(prev[1], dict):
                encoded = self._delta_dict(body, prev[1], prev[0], depth=0)
            self._last[rollout] = (seq, body)
        encoded = self._blobify(encoded, new_blobs, top=True)
        return new_blobs, encoded

    def encode_plain(self, value: Any) -> tuple[list[dict], Any]:
        """Blobs only (outcome records: messages, long strings)."""
        new_blobs: list[dict] = []
        return new_blobs, self._blobify(value, new_blobs, top=False)

    def _delta_dict(self, body: dict, prev: dict, prev_seq: int, depth: int) -> dict:
        out: dict[str, Any] = {}
        for key, value in body.items():
            old = prev.get(key)
            if depth == 0 and key in BLOB_KEYS:
                out[key] = value  # stored once as a blob, more readable than a delta
                continue
            if isinstance(value, list) and isinstance(old, list) and not _has_marker_items(value):
                keep = _common_prefix(value, old)
                if keep > 0:
                    out[key] = {"$delta": {"prev": prev_seq, "keep": keep, "append": value[keep:]}}
                    continue
            elif isinstance(value, str) and isinstance(old, str):
                keep = _common_prefix(value, old)
                if keep >= _MIN_STRING_KEEP:
                    out[key] = {"$delta": {"prev": prev_seq, "keep": keep, "append": value[keep:]}}
                    continue
            elif isinstance(value, dict) and isinstance(old, dict) and depth == 0:
                if not _is_marker(value):
                    out[key] = self._delta_dict(value, old, prev_seq, depth=1)
                    continue
            out[key] = value
        return out

    def _blob(self, value: Any, new_blobs: list[dict]) -> dict:
        if isinstance(value, str):
            ident = self._string_ids.get(value)
            if ident is None:
                ident = self._string_ids[value] = blob_id(value)
        else:
            ident = self._list_id(value)
        if ident not in self._blobs:
            self._blobs.add(ident)
            new_blobs.append({"type": "blob", "id": ident, "value": value})
        return {"$blob": ident}

    def _list_id(self, value: Any) -> str:
        try:
            key = marshal.dumps(value, 2)  # format 2: its bytes hang on the value alone
        except ValueError:  # nested deeper than marshal goes
            return blob_id(value)
        ident = self._list_ids.get(key)
        if ident is None:
            ident = blob_id(value)
            if len(self._list_ids) < 1024:  # a handful of tool lists in a real recording
                self._list_ids[key] = ident
        return ident

    def _blobify(self, value: Any, new_blobs: list[dict], top: bool) -> Any:
        if isinstance(value, str):
            if len(value) >= BLOB_MIN_CHARS or value in self.shared:
                return self._blob(value, new_blobs)
            return value
        if isinstance(value, list):
            return [self._blobify(v, new_blobs, False) for v in value]
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if top and key in BLOB_KEYS and isinstance(item, list) and item:
                    out[key] = self._blob(item, new_blobs)
                else:
                    out[key] = self._blobify(item, new_blobs, False)
            return out
        return value


def _has_marker_items(value: list) -> bool:
    return any(_is_marker(v) for v in value)


class BodyDecoder:
    """Inverse of ``BodyEncoder``; ``lookup(rollout, seq)`` returns an earlier decoded body.

    Blob markers are resolved while a line is parsed (``object_hook``), so a body is never
    walked a second time in Python; only the few top-level delta markers are left to
    ``decode``. A blob is shared, not copied, by every body that refers to it.
    """

    def __init__(self, lookup: Callable[[str, int], Any]) -> None:
        self.blobs: dict[str, Any] = {}
        self._lookup = lookup

    def add_blob(self, ident: str, value: Any) -> None:
        self.blobs[ident] = value

    def object_hook(self, obj: dict[str, Any]) -> Any:
        """For ``json.loads(line, object_hook=...)``: a ``{"$blob": id}`` becomes its value."""
        if len(obj) == 1 and "$blob" in obj:
            ident = obj["$blob"]
            try:
                return self.blobs[ident]
            except (KeyError, TypeError):
                raise DecodeError(
                    f"refers to blob {ident!r}, which no earlier line defines") from None
        return obj

    def decode(self, rollout: str | None, body: Any) -> Any:
        """Apply the delta markers of a body whose blobs are already resolved."""
        if isinstance(body, dict):
            body = self._undelta(rollout, body, path=())
        return body

    def _undelta(self, rollout: str | None, body: dict, path: tuple[str, ...]) -> dict:
        out: dict[str, Any] = {}
        for key, value in body.items():
            if isinstance(value, dict) and len(value) == 1 and "$delta" in value:
                out[key] = self._apply(rollout, value["$delta"], (*path, key))
            elif isinstance(value, dict) and not path:
                out[key] = self._undelta(rollout, value, (key,))
            else:
                out[key] = value
        return out

    def _apply(self, rollout: str | None, delta: Any, path: tuple[str, ...]) -> Any:
        if rollout is None or not isinstance(delta, dict) or "prev" not in delta:
            raise DecodeError(f"malformed delta at body.{'.'.join(path)}")
        prev = self._lookup(rollout, int(delta["prev"]))
        for key in path:
            prev = prev.get(key) if isinstance(prev, dict) else None
        if not isinstance(prev, (list, str)):
            raise DecodeError(
                f"delta at body.{'.'.join(path)} refers to turn {delta['prev']} of rollout "
                f"{rollout!r}, which has no such value"
            )
        keep = int(delta.get("keep", 0))
        append = delta.get("append", [] if isinstance(prev, list) else "")
        return prev[:keep] + append
