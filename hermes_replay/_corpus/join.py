"""Joining the out folders of shard jobs (``replay DIR --shard I/N``, each with its
``replay.json``) into one run: the rows of every cassette in the corpus' order, and what keeps
them from being one complete replay — cassettes no shard replayed (named, with their shard),
shards missing or stopped early, a cassette replayed twice (its first row kept), shards of
different corpora or splits. The join needs no access to the corpus itself.
"""

from __future__ import annotations

from pathlib import Path

from hermes_replay._corpus.manifest import Manifest, ManifestRow
from hermes_replay._corpus.shard import Shard, parse_shard, shard_of

__all__ = ["corpus_of", "join"]

_SHOWN = 20  # missing cassettes named one per line; the rest counted


def corpus_of(manifests: list[Manifest]) -> list[str]:
    """Every cassette any shard saw in the corpus, in the corpus' order."""
    seen: dict[str, None] = {}
    for m in manifests:
        seen.update(dict.fromkeys(m.corpus_cassettes))
    return list(seen)


def join(manifests: list[Manifest]) -> tuple[list[ManifestRow], list[str]]:
    """The rows of all ``manifests`` in the corpus' order, and what keeps them from being
    one complete replay (cassettes no shard replayed, shards missing or stopped early,
    cassettes replayed twice, shards of different corpora)."""
    problems: list[str] = []
    corpus = corpus_of(manifests)
    listings = {tuple(m.corpus_cassettes) for m in manifests}
    if len(listings) > 1:
        problems.append(f"the out folders saw {len(listings)} different corpora (cassettes "
                        "added or removed between the shard jobs?); expected is their union")
    by_rel: dict[str, ManifestRow] = {}
    where: dict[str, Path | None] = {}
    for m in manifests:
        if not m.complete:
            problems.append(f"{m.path}: shard {m.shard or '(all)'} stopped before its end "
                            "(Ctrl-C, SIGTERM or a time limit); replay it again")
        for row in m.rows:
            if row.rel in by_rel:
                problems.append(f"{row.rel} was replayed by {where[row.rel]} and by {m.path}; "
                                "showing the first (two runs of the same shard?)")
                continue
            by_rel[row.rel] = row
            where[row.rel] = m.path
    problems.extend(_shard_gaps(manifests))
    missing = [rel for rel in corpus if rel not in by_rel]
    if missing:
        count = _shard_count(manifests)
        lines = [f"  {rel}" + (f" (shard {shard_of(rel, count)}/{count})" if count else "")
                 for rel in missing[:_SHOWN]]
        more = f"\n  … and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        problems.append(f"{len(missing)} cassette(s) replayed by no shard:\n"
                        + "\n".join(lines) + more)
    order = {rel: i for i, rel in enumerate(corpus)}
    rows = sorted(by_rel.values(), key=lambda r: order.get(r.rel, len(order)))
    return rows, problems


def _shards(manifests: list[Manifest]) -> list[Shard]:
    return [parse_shard(m.shard) for m in manifests if m.shard]


def _shard_count(manifests: list[Manifest]) -> int | None:
    counts = {s.count for s in _shards(manifests)}
    return counts.pop() if len(counts) == 1 else None


def _shard_gaps(manifests: list[Manifest]) -> list[str]:
    shards = _shards(manifests)
    counts = {s.count for s in shards}
    if len(counts) > 1:
        splits = ", ".join(f"of {n}" for n in sorted(counts))
        return [f"the out folders are shards of different splits ({splits}): a cassette's "
                "shard depends on N, so they need not cover the corpus; replay every shard "
                "with the same N"]
    if not shards:
        return []
    count = counts.pop()
    absent = sorted(set(range(1, count + 1)) - {s.index for s in shards})
    if not absent:
        return []
    return [f"no out folder of shard(s) {', '.join(f'{i}/{count}' for i in absent)} among "
            "the ones given (a job that did not run or did not finish?)"]
