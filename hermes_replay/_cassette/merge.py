"""Shards and merging: many environment workers record at once, one cassette comes out.

A real Atropos deployment runs many env worker processes. They must not share one cassette
file (each session rewrites its file on close, and appending from several processes would need
locks), so each worker records a *shard* of its own::

    <cassette>.shards/<name>.jsonl        e.g. cassettes/my_env/process.jsonl.shards/w3.jsonl

(``hermes-replay record … --shard NAME``; ``--shard auto`` names it ``<host>-<pid>``). A shard is
a complete cassette with its own ``.partial`` journal, so workers never wait for each other and
a crashed worker only loses its own shard. ``hermes-replay merge SHARD… -o OUT`` then joins them:

* headers must agree on what was recorded — env name and file, endpoint type, model and
  tokenizer fingerprint — or the merge stops naming the field, the shards and their values;
  the merged header is the first shard's, listing every shard (and any differing commands) in
  ``extra``, and keeping every shard's normalizers (their union; a shard that kept fewer is
  named in the notes);
* rollout ids must be unique across shards (two workers that drew the same item and occurrence
  recorded two different rollouts under one id: replay could serve only one of them) — a
  collision stops the merge naming the rollout and both shards;
* requests made outside rollouts are kept from every shard, renumbered in shard order;
* a tokenizer ``store`` reference is rebased to the output's folder.

Shards are inputs only: they are never modified, and the output is written atomically.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette import (
    Cassette,
    CassetteHeader,
    Interaction,
    RolloutRecord,
    load_cassette,
    write_cassette,
)
from hermes_replay._cassette.files import is_cassette_name, wants_compression, within
from hermes_replay._cassette.write import cannot_write
from hermes_replay._errors import CassetteError

__all__ = ["SHARDS_SUFFIX", "MergeError", "MergeResult", "expand_shards", "is_merged_shard",
           "load_shards", "merge_cassettes", "shard_name", "shard_path"]

SHARDS_SUFFIX = ".shards"
# Header fields every shard must agree on (None = not known in that shard: not compared).
_MUST_AGREE = ("env_name", "env_file", "endpoint_type", "model")


class MergeError(CassetteError):
    """Shards that cannot be joined: different recordings, a rollout id twice, a partial shard."""


@dataclass
class MergeResult:
    output: Path
    shards: list[Path]
    rollouts: int = 0
    interactions: int = 0
    scopeless: int = 0
    notes: list[str] = field(default_factory=list)


def shard_name(name: str) -> str:
    """``auto`` → ``<host>-<pid>``; otherwise ``name``, which must be a plain file name."""
    if name == "auto":
        name = f"{socket.gethostname().split('.')[0] or 'host'}-{os.getpid()}"
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(f"bad shard name {name!r}: use letters, digits, '-', '_' or '.' "
                         "(one per worker, e.g. w0, w1 …, or 'auto' for <host>-<pid>)")
    return name


def shard_path(cassette: str | Path, name: str) -> Path:
    """Where worker ``name`` of ``cassette`` records: ``<cassette>.shards/<name>.jsonl``
    (``.jsonl.zst`` if the cassette is compressed)."""
    cassette = Path(cassette)
    suffix = ".jsonl.zst" if wants_compression(cassette) else ".jsonl"
    return cassette.with_name(cassette.name + SHARDS_SUFFIX) / f"{shard_name(name)}{suffix}"


def is_merged_shard(path: str | Path) -> bool:
    """A shard whose merged cassette exists beside its ``.shards`` folder (a folder replay
    replays the merged cassette, not each shard again)."""
    folder = Path(path).parent
    if not folder.name.endswith(SHARDS_SUFFIX):
        return False
    return folder.with_name(folder.name[: -len(SHARDS_SUFFIX)]).is_file()


def expand_shards(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; a folder (e.g. ``x.jsonl.shards``) gives its ``*.jsonl`` and
    ``*.jsonl.zst`` in name order, then the journals of shards that never finished."""
    out: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            # a shard linked in from outside the folder is not one of its shards
            files = sorted(p for p in path.iterdir() if p.is_file() and within(p, path))
            out.extend(p for p in files if is_cassette_name(p.name))
            out.extend(p for p in files if p.name.endswith(".partial")
                       and is_cassette_name(p.name, partial=True)
                       and not p.with_name(p.name[: -len(".partial")]).exists())
        else:
            out.append(path)
    return out


def _disagreement(cassettes: Sequence[Cassette]) -> str | None:
    for name in (*_MUST_AGREE, "tokenizer"):
        seen: dict[str, list[Path]] = {}
        for c in cassettes:
            value = getattr(c.header, name)
            if name == "tokenizer":
                value = (value or {}).get("fingerprint")
            if value in (None, ""):
                continue
            seen.setdefault(str(value), []).append(c.path)
        if len(seen) > 1:
            listed = "; ".join(f"{value!r} in {', '.join(map(str, paths))}"
                               for value, paths in seen.items())
            what = "tokenizer fingerprint" if name == "tokenizer" else name
            return f"the shards were not recorded alike: {what} differs ({listed})"
    return None


def _rebased_tokenizer(header: CassetteHeader, shard: Path, output: Path) -> Any:
    tokenizer = dict(header.tokenizer or {}) or None
    if tokenizer and tokenizer.get("store"):
        target = (shard.resolve().parent / tokenizer["store"]).resolve()
        tokenizer["store"] = Path(os.path.relpath(target, output.resolve().parent)).as_posix()
    return tokenizer


def merge_cassettes(shards: Sequence[str | Path], output: str | Path, *,
                    allow_partial: bool = False) -> MergeResult:
    """Join ``shards`` into one cassette at ``output``; raises :class:`MergeError`."""
    output = Path(output)
    paths = expand_shards(shards)  # a .shards folder gives its shards
    if not paths:
        raise MergeError("no shards to merge", path=output,
                         hint="pass shard files or a <cassette>.shards folder")
    if any(p.resolve() == output.resolve() for p in paths if p.exists()):
        raise MergeError("the output is one of the shards", path=output,
                         hint="write the merged cassette to a new path (-o)")
    cassettes = [load_cassette(p) for p in paths]  # CassetteError names file:line
    partial = [c.path for c in cassettes if not c.complete]
    if partial and not allow_partial:
        raise MergeError(
            f"{len(partial)} shard(s) are interrupted recordings: "
            + ", ".join(map(str, partial)), path=partial[0],
            hint="re-record that worker, leave it out, or pass --allow-partial to merge the "
                 "interactions it completed")
    joined = _combine(cassettes, output)
    try:
        write_cassette(output, joined.header, joined.interactions, joined.outcomes,
                       joined.tool_calls)
    except OSError as exc:
        raise cannot_write(exc, output, "the merged cassette") from None
    notes = [f"{c.path}: incomplete, {len(c.interactions)} completed interaction(s) kept"
             for c in cassettes if not c.complete] + normalizer_notes(cassettes)
    return MergeResult(output, [c.path for c in cassettes], rollouts=joined.rollouts,
                       interactions=len(joined.interactions), scopeless=joined.scopeless,
                       notes=notes)


def load_shards(folder: str | Path) -> Cassette:
    """The cassette a folder of shards merges into, in memory (nothing is written): what
    ``ls``/``show``/``diff``/``check`` and a replay see when given ``<cassette>.shards/``.
    Shards that cannot be merged raise :class:`MergeError` as ``merge`` would."""
    folder = Path(folder)
    paths = expand_shards([folder])
    if not paths:
        raise CassetteError("a folder with no cassette shards (*.jsonl, *.jsonl.zst)",
                            path=folder, hint="pass a cassette file, or the <cassette>.shards "
                            "folder that `record --shard` wrote")
    cassettes = [load_cassette(p) for p in paths]
    # a header's tokenizer store is relative to the cassette's folder: for this one, the
    # folder the .shards folder is in, as for the cassette a merge would write beside it
    joined = _combine(cassettes, folder)
    rollouts: dict[str, RolloutRecord] = {}
    for inter in joined.interactions:
        if inter.rollout is not None:
            rollouts.setdefault(inter.rollout, RolloutRecord(inter.rollout)) \
                .interactions.append(inter)
    for rid, outcome in joined.outcomes.items():
        rollouts.setdefault(rid, RolloutRecord(rid)).outcome.update(outcome)
    return Cassette(folder, joined.header, joined.interactions, dict(sorted(rollouts.items())),
                    complete=all(c.complete for c in cassettes), tool_calls=joined.tool_calls)


@dataclass
class _Joined:
    header: CassetteHeader
    interactions: list[Interaction]
    outcomes: dict[str, dict[str, Any]]
    tool_calls: list[Any]
    rollouts: int
    scopeless: int


def _combine(cassettes: Sequence[Cassette], output: Path) -> _Joined:
    """What the merged shards hold; raises ``MergeError`` for shards of different recordings
    or a rollout id recorded twice. Scope-less records are renumbered in shard order."""
    problem = _disagreement(cassettes)
    if problem:
        raise MergeError(problem, path=output, hint="merge only shards of one recording "
                         "(same env, endpoint type, model and tokenizer), or re-record")
    owner: dict[str, Path] = {}
    interactions: list[Interaction] = []
    outcomes: dict[str, dict[str, Any]] = {}
    tool_calls = []
    scopeless = scopeless_tools = 0
    for c in cassettes:
        ids = set(c.rollouts) | {i.rollout for i in c.interactions if i.rollout is not None}
        for rid in sorted(ids):
            if rid in owner:
                raise MergeError(
                    f"rollout {rid!r} was recorded in two shards: {owner[rid]} and {c.path}",
                    path=c.path,
                    hint="two workers drew the same item and occurrence under one worker "
                         "identity; replay can serve only one of them — give each worker its "
                         "own identity (record --worker NAME, or --shard auto in serve), merge "
                         "only one of these shards, or re-record")
            owner[rid] = c.path
        for inter in c.interactions:
            if inter.rollout is None:
                inter = inter.model_copy(update={"seq": scopeless})
                scopeless += 1
            interactions.append(inter)
        for call in c.tool_calls:
            if call.rollout is None:
                call = call.model_copy(update={"seq": scopeless_tools})
                scopeless_tools += 1
            tool_calls.append(call)
        outcomes.update({rid: dict(o) for rid, o in c.outcomes.items()})
    return _Joined(_merged_header(cassettes, output), interactions, outcomes, tool_calls,
                   len(owner), scopeless)


def _merged_header(cassettes: Sequence[Cassette], output: Path) -> CassetteHeader:
    first = cassettes[0].header
    shards = [{"shard": c.path.name, "created": c.header.created,
               "rollouts": len(c.rollouts), "interactions": len(c.interactions)}
              for c in cassettes]
    extra: dict[str, Any] = {**first.extra, "shards": shards}
    commands = {c.path.name: c.header.command for c in cassettes}
    if len({tuple(cmd) for cmd in commands.values()}) > 1:
        extra["shard_commands"] = commands
    tokenizer = next((c.header.tokenizer for c in cassettes if c.header.tokenizer), None)
    owner = next((c for c in cassettes if c.header.tokenizer), cassettes[0])
    fields: dict[str, Any] = {
        "created": min(c.header.created for c in cassettes),
        "extra": extra,
        "tokenizer": _rebased_tokenizer(owner.header, owner.path, output) if tokenizer else None,
    }
    for name in _MUST_AGREE:  # a shard that knew the value fills it in
        if getattr(first, name) in (None, ""):
            fields[name] = next((getattr(c.header, name) for c in cassettes
                                 if getattr(c.header, name) not in (None, "")), None)
    fields["normalizers"] = _all_normalizers(cassettes)
    data = first.model_dump()
    data.update(fields)
    return CassetteHeader.model_validate(data)


def _all_normalizers(cassettes: Sequence[Cassette]) -> list[Any]:
    """Every shard's kept normalizers, first shard's first (a replay of the merged cassette
    must match each shard's recordings as its own replay did)."""
    out: list[Any] = []
    for c in cassettes:
        for item in c.header.normalizers if isinstance(c.header.normalizers, list) else ():
            if item not in out:
                out.append(item)
    return out


def normalizer_notes(cassettes: Sequence[Cassette]) -> list[str]:
    """One note per shard that keeps other normalizers than the union the merge keeps."""
    union = _all_normalizers(cassettes)
    shown = ", ".join(i if isinstance(i, str) else "=".join(map(str, i)) for i in union)
    return [f"{c.path}: keeps {len(c.header.normalizers or [])} of the {len(union)} "
            f"normalizers the merged cassette keeps ({shown}); they now apply to every "
            "shard's recordings" for c in cassettes
            if len(_all_normalizers([c])) != len(union)]  # a subset of the union: fewer
