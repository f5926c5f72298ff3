"""A plain env's item as identity: one canonical form, the same in every process and run.

Community environments build items from ``frozenset(message.items())`` (hashable message
dicts), carry ``uuid4()`` ids, timestamps and boards drawn from the RNG. A rollout id made from
``json.dumps(item, default=repr)`` changed with ``PYTHONHASHSEED`` (a set's ``repr`` follows
its hash order) and with every uuid. Here:

- :func:`canonical` turns an item into JSON data with no order that depends on the process:
  dict keys sorted (by their canonical text when they are not strings), set and frozenset
  elements sorted by their canonical text, tuples as lists, numpy-like values through
  ``tolist()``, dataclasses and pydantic models as their fields, anything else as its ``repr``
  with memory addresses taken out;
- :func:`item_hash` hashes that text after the volatile values the built-in normalizers know
  (uuids, dates and times, Unix times, temporary paths) are rewritten to placeholders — the
  same rewrites a request goes through when the cassette asks for them (``docs/matching.md``);
- :func:`legacy_item_hash` is the rule cassettes recorded before this one were keyed by: a
  replay of an older cassette still finds its groups;
- :func:`item_changes` names the fields of two items that really differ (old → new), for the
  miss of a rollout whose item changed since it was recorded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["ITEM_TEXT_LIMIT", "VOLATILE", "canonical", "canonical_text", "item_changes",
           "item_hash", "legacy_item_hash", "normalized"]

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
#: built-in normalizers applied to an item before it is hashed: values that are new in every run
VOLATILE = ("uuid", "datetime", "epoch", "tmp-path")
#: the canonical text kept in the cassette per group (longer items keep their hash only)
ITEM_TEXT_LIMIT = 16_000
_DEPTH = 64  # deeper structures are kept as their repr: an item is data, not a graph


def canonical(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data whose every order is the same in every process (module doc)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) \
            else repr(value)
    if depth > _DEPTH:
        return _ADDRESS.sub("", repr(value))
    if isinstance(value, dict):
        pairs = [(k if isinstance(k, str) else _text(canonical(k, depth + 1)),
                  canonical(v, depth + 1)) for k, v in value.items()]
        return dict(sorted(pairs, key=lambda kv: kv[0]))
    if isinstance(value, (list, tuple)):
        return [canonical(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v, depth + 1) for v in value), key=_text)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return canonical(fields, depth + 1)
    dump = getattr(value, "model_dump", None) or getattr(value, "tolist", None)
    if callable(dump):
        try:
            return canonical(dump(), depth + 1)
        except Exception:  # a model that cannot dump itself: its repr, as for anything else
            pass
    return _ADDRESS.sub("", repr(value))


def _text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(item: Any) -> str:
    """The canonical JSON text of ``item`` (what the cassette keeps, before normalizing)."""
    return _text(canonical(item))


def normalized(text: str, extra: Iterable[tuple[str, str]] = ()) -> str:
    """``text`` with the volatile values (``VOLATILE``, then ``extra`` rewrites) replaced."""
    from hermes_replay._cassette.normalizers import BUILTINS

    for name in VOLATILE:
        for pattern, replacement in BUILTINS[name].rewrites:
            text = re.sub(pattern, replacement, text)
    for pattern, replacement in extra:
        try:
            text = re.sub(pattern, replacement, text)
        except re.error:  # a cassette's pattern the matcher refuses too: not ours to apply
            continue
    return text


def item_hash(item: Any) -> str:
    """12 hex digits of the item's normalized canonical text: the same in every process, on
    every machine, with every ``PYTHONHASHSEED``, and in the next run of an item whose uuids and
    timestamps are new."""
    return hashlib.sha256(normalized(canonical_text(item)).encode("utf-8")).hexdigest()[:12]


def legacy_item_hash(item: Any) -> str:
    """The hash cassettes recorded before canonical items were keyed by (kept verbatim)."""
    try:
        text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=lambda value: _ADDRESS.sub("", repr(value)))
    except (TypeError, ValueError):
        text = _ADDRESS.sub("", repr(item))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _leaves(data: Any, path: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_leaves(value, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(data, list) and data:
        out = {}
        for i, value in enumerate(data):
            out.update(_leaves(value, f"{path}[{i}]"))
        return out
    return {path or "(item)": data}


def _shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def item_changes(old_text: str, new_text: str, extra: Iterable[tuple[str, str]] = (),
                 limit: int = 3) -> list[str]:
    """The fields that differ between two canonical item texts once volatile values are
    normalized, as ``field: old → new`` (the first ``limit``, then how many more); empty when
    they are the same item."""
    extra = tuple(extra)
    try:
        old, new = json.loads(old_text), json.loads(new_text)
    except ValueError:
        old, new = old_text, new_text
    before, after = _leaves(old), _leaves(new)
    changed = []
    for path in [*before, *(p for p in after if p not in before)]:
        a, b = before.get(path, _MISSING), after.get(path, _MISSING)
        if a is _MISSING or b is _MISSING:
            changed.append(f"{path}: {'(none)' if a is _MISSING else _shown(a)} → "
                           f"{'(none)' if b is _MISSING else _shown(b)}")
        elif normalized(_text(a), extra) != normalized(_text(b), extra):
            changed.append(f"{path}: {_shown(a)} → {_shown(b)}")
    if len(changed) > limit:
        changed = [*changed[:limit], f"and {len(changed) - limit} more field(s)"]
    return changed


_MISSING = object()
