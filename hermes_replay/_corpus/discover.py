"""Which cassettes a corpus holds, what each is called in it, and where its outputs go.

A cassette's name in the corpus is its path relative to the folder given (posix; the key of
its shard and of its row in ``replay.json``); its outputs go to that name without
``.jsonl``/``.jsonl.zst`` below the out folder. Cassettes of shards already merged are replayed
through their merged cassette, not twice.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_replay._corpus.errors import CorpusError

__all__ = ["NOTHING_RECORDED", "Corpus", "discover", "output_names"]

NOTHING_RECORDED = "nothing recorded yet — record one with: hermes-replay record"


@dataclass(frozen=True)
class Corpus:
    name: str  # the paths as given, for the manifest
    cassettes: list[Path]  # as found (relative to the working directory when given so)
    rels: list[str]  # each one's name in the corpus
    outputs: list[Path]  # each one's output folder below the out folder


def discover(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> Corpus:
    """The cassettes under ``paths``; ``CorpusError`` when a path is missing or not a file or
    folder, or when there is no cassette at all."""
    from hermes_replay._cassette.merge import is_merged_shard
    from hermes_replay._runner.plan import find_cassettes, special_file_problem

    targets = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else \
        [Path(p) for p in paths]
    if not targets:
        raise CorpusError("no path given, so nothing was replayed. Next step: pass a cassette "
                          "or a folder of cassettes (default ./cassettes)")
    cassettes: list[Path] = []
    rels: list[str] = []
    seen: set[Path] = set()
    for target in targets:
        if not target.exists() and target != Path("cassettes"):
            raise CorpusError(f"{target} does not exist. Next step: pass a cassette file or a "
                              "folder of cassettes (default ./cassettes).")
        problem = special_file_problem(target)
        if problem is not None:
            raise CorpusError(problem)
        for found in find_cassettes(target):
            if target.is_dir() and is_merged_shard(found):
                continue
            key = found.resolve()
            if key in seen:
                continue
            seen.add(key)
            rel = found.relative_to(target) if target.is_dir() else Path(found.name)
            if len(targets) > 1:  # several folders: each keeps its own name in the corpus
                rel = Path(target.as_posix().strip("/")) / rel if target.is_dir() else \
                    Path(target.as_posix().strip("/"))
            cassettes.append(found)
            rels.append(rel.as_posix())
    name = ", ".join(str(t) for t in targets)
    if not cassettes:
        raise CorpusError(
            f"no cassette in {name}, so nothing was replayed ({NOTHING_RECORDED} ENV_FILE "
            "--endpoint URL --model NAME -- process). Next step: record one, or pass the "
            "folder that holds them.")
    return Corpus(name, cassettes, rels, output_names([Path(r) for r in rels]))


def output_names(rels: list[Path]) -> list[Path]:
    """Each cassette's output folder under the out folder, one per cassette: ``x.jsonl`` and
    ``x.jsonl.zst`` side by side (what ``compact -o`` leaves) would share ``x/`` — one
    result.json, one rescored file — so the compressed one then gets ``x.zst/``."""
    names = [output_name(rel) for rel in rels]
    taken = Counter(names)
    return [name.with_name(name.name + ".zst") if taken[name] > 1 and rel.name.endswith(".zst")
            else name for rel, name in zip(rels, names, strict=True)]


def output_name(rel: Path) -> Path:
    """Where a cassette's outputs go under the out folder: its path without .jsonl /
    .jsonl.zst."""
    name = rel.name
    for suffix in (".jsonl.zst", ".jsonl"):
        if name.endswith(suffix):
            return rel.with_name(name[: -len(suffix)])
    return rel.with_suffix("")
