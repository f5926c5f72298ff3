"""``hermes-replay compact``: rewrite a cassette with every shared string stored once.

A recording already stores long strings (≥ 400 characters) and tool lists once, and each
request only as the messages it added. What still repeats: an assistant reply is written in
its response and again in the next request of the rollout; tool-call arguments, short tool
results and prompts shared by a GRPO group recur across rollouts. ``compact`` finds every
string of at least ``MIN_SHARED_CHARS`` characters that the written file would hold more than
once and stores it once, as a blob, responses included.

Why not always: a compacted cassette reads worse in a pull request (a reply is a reference,
not text), and plain ``.jsonl`` is the format for small, reviewable cassettes. Compaction is
for large ones, usually together with zstd (``-o big.jsonl.zst``). Replay, ``ls``, ``show``
and ``diff`` see exactly the same interactions; only the bytes on disk change.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._cassette import Cassette, file_records, load_cassette, write_cassette
from hermes_replay._cassette.format import BodyEncoder
from hermes_replay._cassette.write import cannot_write
from hermes_replay._errors import CassetteError

__all__ = ["MIN_SHARED_CHARS", "CompactResult", "compact_cassette"]

# below this, a reference ({"$blob": "<16 hex>"}, 29 bytes) and a blob record (~45 bytes
# plus the value) cost more than two inline copies
MIN_SHARED_CHARS = 100


@dataclass(frozen=True)
class CompactResult:
    source: Path
    output: Path
    bytes_before: int
    bytes_after: int
    interactions: int
    shared_strings: int


def compact_cassette(source: str | Path, output: str | Path | None = None) -> CompactResult:
    """Rewrite ``source`` (in place, atomically, unless ``output`` is given) with shared
    strings stored once; ``output`` ending in ``.zst`` also compresses it."""
    source = Path(source)
    output = Path(output) if output is not None else source
    if source.is_dir():
        raise CassetteError("compact takes one cassette file, not a folder", path=source,
                            hint="merge shards first (`hermes-replay merge DIR -o OUT`), then "
                                 "compact OUT")
    cassette = load_cassette(source)
    if not cassette.complete:
        raise CassetteError("an interrupted recording (.partial) cannot be compacted",
                            path=source, hint="rename it to its cassette name if what it holds "
                            "is what you want, or re-record it")
    before = source.stat().st_size
    shared = _repeated_strings(cassette)
    expected = _content(cassette)

    def reads_back(written: Path) -> None:
        # checked on the temp file, before it replaces anything: a compacted file must read
        # back as the same cassette, or the source (compacted in place) would be lost
        if _content(load_cassette(written)) != expected:
            raise CassetteError("the compacted cassette does not read back as the original "
                                "(a bug in hermes-replay); nothing was written", path=output,
                                hint=f"{source} is unchanged; please report this")

    try:
        write_cassette(output, cassette.header, cassette.interactions, cassette.outcomes,
                       cassette.tool_calls, encoder=BodyEncoder(shared=shared),
                       check=reads_back)
    except OSError as exc:
        raise cannot_write(exc, output, "the compacted cassette") from None
    return CompactResult(source, output, before, output.stat().st_size,
                         len(cassette.interactions), len(shared))


def _content(cassette: Cassette) -> tuple[Any, ...]:
    """What a cassette holds, independent of the order its records were written in: a valid
    cassette may list its rollouts in any order, and the writer puts them in sorted order."""
    def key(record: dict[str, Any]) -> tuple[str, int, str]:
        return (record.get("rollout") or "", record.get("seq", 0),
                json.dumps(record, sort_keys=True, default=str))

    return (sorted((i.model_dump(mode="json") for i in cassette.interactions), key=key),
            dict(sorted(cassette.outcomes.items())),
            sorted((t.model_dump(mode="json") for t in cassette.tool_calls), key=key))


def _repeated_strings(cassette: Cassette) -> frozenset[str]:
    """Strings the plainly written file would hold twice or more (counted in the records it
    would write — after the per-rollout deltas, so a conversation prefix is not counted)."""
    counts: Counter[str] = Counter()
    for record in file_records(cassette.interactions, cassette.outcomes, cassette.tool_calls,
                               BodyEncoder()):
        _count(record, counts)
    return frozenset(s for s, n in counts.items() if n > 1)


def _count(value: Any, counts: Counter[str]) -> None:
    if isinstance(value, str):
        if len(value) >= MIN_SHARED_CHARS:
            counts[value] += 1
    elif isinstance(value, dict):
        for item in value.values():
            _count(item, counts)
    elif isinstance(value, list):
        for item in value:
            _count(item, counts)
