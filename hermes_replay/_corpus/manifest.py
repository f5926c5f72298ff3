"""``<out>/replay.json``: what one ``replay DIR`` job replayed, for ``hermes-replay results``.

A corpus replayed by N shard jobs leaves N out folders, maybe on N machines. Each job writes
this file at its end (and when Ctrl-C or SIGTERM stops it, marked incomplete)::

    {"type": "hermes-replay-replay", "schema_version": 1, "corpus": "<DIR as given>",
     "shard": "2/8" | null, "complete": true,
     "corpus_cassettes": ["<path relative to DIR>", ...],   # the whole corpus, every shard
     "rows": [{"rel": "...", "cassette": "<as printed>", "mode": "process",
               "summary": {RunSummary fields}}, ...]}

Every shard lists the whole corpus it saw, so ``results`` can name the cassettes that no
shard replayed even when a shard's folder is missing altogether (its job never ran, or died
before writing). Rows keep the run's own summary, so the joined table is the one each job
printed, not a re-derivation from ``result.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hermes_replay._cassette.files import write_text_atomic
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._errors import CassetteError

__all__ = ["MANIFEST_FILE", "Manifest", "ManifestRow", "read_manifest", "write_manifest"]

MANIFEST_FILE = "replay.json"
_TYPE = "hermes-replay-replay"
_SCHEMA = 1
_SUMMARY_FIELDS = {f.name for f in fields(RunSummary)}


@dataclass
class ManifestRow:
    rel: str  # the cassette's path relative to the corpus (posix): the key across shards
    cassette: str  # as the job printed it
    mode: str
    summary: RunSummary


@dataclass
class Manifest:
    corpus: str
    shard: str | None
    corpus_cassettes: list[str]
    rows: list[ManifestRow] = field(default_factory=list)
    complete: bool = True
    path: Path | None = None  # where it was read from


def write_manifest(out: Path, manifest: Manifest) -> Path:
    data = {
        "type": _TYPE, "schema_version": _SCHEMA, "corpus": manifest.corpus,
        "shard": manifest.shard, "complete": manifest.complete,
        "corpus_cassettes": list(manifest.corpus_cassettes),
        "rows": [{"rel": r.rel, "cassette": r.cassette, "mode": r.mode,
                  "summary": asdict(r.summary)} for r in manifest.rows],
    }
    out.mkdir(parents=True, exist_ok=True)
    target = out / MANIFEST_FILE
    write_text_atomic(target, json.dumps(data, indent=1, default=repr) + "\n")
    return target


# The JSON types a summary field may hold, from its annotation, checked all the way down (the
# file is data: a value of the wrong type, even inside a dict, must be a clear error here, not
# an AttributeError in the table).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "str": (str,), "float": (int, float), "None": (type(None),),
    "dict": (dict,), "list": (list,), "tuple": (list,), "Any": (object,),
}
# --rescore K: each rollout's statistics (``rescore.rescore_stats``), numbers the table sums
_RESCORE_STATS = {"recorded": "float | None", "mean": "float | None", "stdev": "float | None",
                  "min": "float | None", "max": "float | None", "rewards": "list[float | None]"}


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets (``dict[str, int] | None``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text + sep):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts


def _check(value: Any, annotation: str, where: str) -> None:
    """``ValueError`` naming ``where`` when ``value`` is not of the JSON shape
    ``annotation`` (a dataclass field's annotation, as text) says."""
    options = []
    for part in _split(annotation, "|"):
        base, _, inner = part.partition("[")
        options.append((base.strip(), _split(inner[:-1], ",") if inner else [],
                        _JSON_TYPES.get(base.strip(), (object,))))
    for base, args, types in options:
        if isinstance(value, bool) and bool not in types and object not in types:
            continue  # JSON true is no number
        if not isinstance(value, types):
            continue
        if base == "dict" and len(args) == 2:
            for key, item in value.items():
                _check(item, args[1], f"{where}[{key!r}]")
        elif base == "list" and len(args) == 1:
            for i, item in enumerate(value):
                _check(item, args[0], f"{where}[{i}]")
        elif base == "tuple" and args:
            if len(value) != len(args):
                raise ValueError(f"{where} is a list of {len(value)}, not {len(args)}")
            for i, (item, arg) in enumerate(zip(value, args, strict=True)):
                _check(item, arg, f"{where}[{i}]")
        return
    allowed = " or ".join(t.__name__ for _, _, types in options for t in types)
    raise ValueError(f"{where} is a {type(value).__name__}, not {allowed}")


_SUMMARY_TYPES = {f.name: str(f.type) for f in fields(RunSummary)}


def _summary(data: dict[str, Any]) -> RunSummary:
    known = {k: v for k, v in data.items() if k in _SUMMARY_FIELDS}
    for name, value in known.items():
        _check(value, _SUMMARY_TYPES[name], f"summary field {name!r}")
    for rid, stats in (known.get("rescore") or {}).items():
        for key, value in stats.items():
            if key in _RESCORE_STATS:
                _check(value, _RESCORE_STATS[key], f"summary field 'rescore'[{rid!r}][{key!r}]")
    known["changed"] = {rid: (pair[0], pair[1]) for rid, pair in
                        (known.get("changed") or {}).items()}
    return RunSummary(**known)


def _shard(value: Any) -> str | None:
    """The manifest's ``shard``: None or an ``I/N`` ``results`` can use."""
    from hermes_replay._corpus.shard import parse_shard

    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"shard is a {type(value).__name__}, not \"I/N\" or null")
    parse_shard(value)  # ShardError (a ValueError) says what is wrong
    return value


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the out folder ``folder``; ``CassetteError`` naming it when there is
    none or it cannot be read (the one "this input cannot be used" error)."""
    path = folder / MANIFEST_FILE
    hint = ("pass the --out folder of a `hermes-replay replay DIR` run (each shard's own); "
            "a run stopped before its end wrote none — replay that shard again")
    if not path.is_file():
        raise CassetteError("no replay.json here: not the out folder of a finished "
                            "`hermes-replay replay DIR`", path=folder, hint=hint)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("type") != _TYPE:
            raise ValueError(f"its type is not {_TYPE!r}")
        if data.get("schema_version") != _SCHEMA:
            raise ValueError(f"schema_version {data.get('schema_version')!r}, this version "
                             f"reads {_SCHEMA}")
        rows = [ManifestRow(str(r["rel"]), str(r["cassette"]), str(r["mode"]),
                            _summary(dict(r["summary"]))) for r in data["rows"]]
        complete = data.get("complete", False)
        if not isinstance(complete, bool):  # "false" is a non-empty string: it is no true
            raise ValueError(f"complete is {complete!r:.20}, not true or false")
        return Manifest(corpus=str(data["corpus"]), shard=_shard(data.get("shard")),
                        corpus_cassettes=[str(c) for c in data["corpus_cassettes"]],
                        rows=rows, complete=complete, path=path)
    except RecursionError:
        raise CassetteError("cannot be read as a replay manifest (nested too deeply)",
                            path=path, hint=hint) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CassetteError(f"cannot be read as a replay manifest ({exc})", path=path,
                            hint=hint) from exc
