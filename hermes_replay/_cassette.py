"""The cassette: a versioned JSON Lines file of recorded LLM interactions.

Line 1 is the header (``{"type": "header", "schema_version": 2, ...}``); then records:

- ``{"type": "blob", "id", "value"}`` — a long string or tool list, stored once
- ``{"type": "interaction", "rollout", "seq", "kind", "fingerprint", "duration_ms",
  "request": {"method", "url", "headers", "body"}, "response": {"status", "headers",
  "body" | "text" | "chunks"}}`` — bodies use the delta/blob encoding of ``_format``
- ``{"type": "tool", "rollout", "seq", "turn", "source", "name", "arguments", "result", …}``
  — one tool call and its result (schema 2; see ``_toolcalls``)
- ``{"type": "outcome", "rollout", ...fields}`` — what the env reported (reward, turns …)
- ``{"type": "annotate", "fields"}`` — only in ``.partial`` files; merged into the header

A finished cassette is rewritten in a stable order (scope-less requests, then rollouts by
id, each turn followed by the tool calls that answer it, then the rollout's reward-time tool
calls and its outcome) so re-recording the same run gives a small git diff.
Writing goes to ``<path>.partial`` (one flushed line per record) and is renamed over
``<path>`` only on a clean close, so a crash never touches an existing cassette.

Over 400 lines because reader, journal writer and final rewrite share one set of record shapes
and one set of crash-safety rules (locking, temp files, fsync); the body encoding lives apart
in ``_format``.
"""

from __future__ import annotations

import fcntl
import gc
import glob
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hermes_replay._errors import CassetteError
from hermes_replay._files import open_for_write, read_bytes, wants_compression
from hermes_replay._format import BodyDecoder, BodyEncoder, DecodeError
from hermes_replay._matching import request_path
from hermes_replay._toolcalls import ToolCall

__all__ = [
    "SCHEMA_VERSION",
    "Cassette",
    "CassetteHeader",
    "CassetteWriter",
    "Interaction",
    "RolloutRecord",
    "load_cassette",
    "partial_path",
    "write_cassette",
]

SCHEMA_VERSION = 2  # 2 added tool records; schema 1 files (no tool calls) still load
_RERECORD = "re-record it with `hermes-replay record …` (or mode='record')"


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _harness_version() -> str:
    from hermes_replay import __version__

    return __version__


class CassetteHeader(BaseModel):
    """What was recorded, with what, and how (line 1 of every cassette)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    harness_version: str = Field(default_factory=_harness_version)
    created: str = Field(default_factory=_now)
    env_name: str | None = None
    env_file: str | None = None
    command: list[str] = Field(default_factory=list)
    endpoint_type: str | None = None
    base_url: str | None = None
    model: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    tokenizer: dict[str, Any] | None = None
    #: what ``random`` and numpy were seeded with before the environment started
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def merged(self, fields: dict[str, Any]) -> CassetteHeader:
        """A copy with ``fields`` applied: known names set, everything else into ``extra``."""
        data = self.model_dump()
        known = set(type(self).model_fields) - {"type", "schema_version"}
        for key, value in fields.items():
            if key in known and key != "extra":
                data[key] = value
            elif key == "extra" and isinstance(value, dict):
                data["extra"] = {**data["extra"], **value}
            else:
                data["extra"][key] = value
        return CassetteHeader.model_validate(data)


class Interaction(BaseModel):
    """One LLM request and its response, both complete (decoded) and redacted."""

    rollout: str | None = None
    seq: int = 0
    kind: str = "other"
    request: dict[str, Any]
    response: dict[str, Any]
    fingerprint: str = ""
    duration_ms: float = 0.0

    @property
    def key(self) -> tuple[str | None, int]:
        return (self.rollout, self.seq)


@dataclass
class RolloutRecord:
    id: str
    interactions: list[Interaction] = field(default_factory=list)
    outcome: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Cassette:
    """A loaded cassette. ``complete`` is False for a ``.partial`` (interrupted) recording."""

    path: Path
    header: CassetteHeader
    interactions: list[Interaction]
    rollouts: dict[str, RolloutRecord]
    complete: bool = True
    tool_calls: list[ToolCall] = field(default_factory=list)

    @property
    def scopeless(self) -> list[Interaction]:
        return [i for i in self.interactions if i.rollout is None]

    @property
    def outcomes(self) -> dict[str, dict[str, Any]]:
        return {rid: r.outcome for rid, r in self.rollouts.items() if r.outcome}


def partial_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".partial")


# ----------------------------------------------------------------------------- reading


def load_cassette(path: str | Path) -> Cassette:
    """Read a cassette file (or a ``.partial`` one); raises ``CassetteError`` naming file:line.

    ``.jsonl`` and zstd-compressed ``.jsonl.zst`` read alike (see ``_files``). A folder of
    shards is read by ``_load.load_cassette`` (the public one).
    """
    path = Path(path)
    is_partial = path.name.endswith(".partial")
    if not path.exists():
        hint = f"check the path, or {_RERECORD} (mode='auto' records it)"
        if partial_path(path).exists():
            hint = (f"an interrupted recording is in {partial_path(path)}: inspect it "
                    f"(`hermes-replay show {partial_path(path)}`) and rename it to {path.name} "
                    f"to use what it holds, or {_RERECORD}")
        raise CassetteError("no such cassette", path=path, hint=hint)
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise CassetteError(f"cannot read the file: {exc}", path=path,
                            hint="restore it from git, or " + _RERECORD) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=path,
                            line=data.count(b"\n", 0, exc.start) + 1,
                            hint="the file is damaged; restore it from git, or "
                            + _RERECORD) from exc
    lines = text.split("\n")
    truncated_tail = bool(lines) and lines[-1] != ""
    if lines and lines[-1] == "":
        lines.pop()
    with paused_gc():
        return _parse(path, lines, is_partial=is_partial, truncated_tail=truncated_tail)


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block.

    Loading and indexing a cassette allocate many small dicts and lists and free none of them;
    the collector's full passes over them were a quarter of the load time and most of the
    index time of a large cassette. Nothing cyclic is created there, so nothing is missed.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse(path: Path, lines: list[str], *, is_partial: bool, truncated_tail: bool) -> Cassette:
    bodies: dict[tuple[str, int], Any] = {}

    def lookup(rollout: str, seq: int) -> Any:
        if (rollout, seq) not in bodies:
            raise DecodeError(f"refers to turn {seq} of rollout {rollout!r}, not found earlier")
        return bodies[(rollout, seq)]

    decoder = BodyDecoder(lookup)
    parse_json = json.JSONDecoder(object_hook=decoder.object_hook).decode  # built once
    header: CassetteHeader | None = None
    interactions: list[Interaction] = []
    rollouts: dict[str, RolloutRecord] = {}
    seen: dict[tuple[str | None, int], int] = {}
    tool_calls: list[ToolCall] = []
    seen_tools: dict[tuple[str | None, int], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except DecodeError as exc:  # raised by the blob hook: the JSON itself is fine
            raise CassetteError(f"bad {_kind_of(line)} record: {_short(exc)}", path=path,
                                line=number, hint="restore the file from git, or "
                                + _RERECORD) from exc
        except (ValueError, RecursionError) as exc:  # also: nesting too deep, huge numbers
            if is_partial and truncated_tail and number == len(lines):
                break  # the write the crash interrupted; everything before it is whole
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else _short(exc)
            raise CassetteError(f"not valid JSON ({why})", path=path, line=number,
                                hint="the file is damaged; restore it from git, or "
                                + _RERECORD) from exc
        kind = record.get("type") if isinstance(record, dict) else None
        if header is None:
            header = _read_header(path, number, record)
            continue
        try:
            if kind == "blob":
                decoder.add_blob(str(record["id"]), record["value"])
            elif kind == "interaction":
                inter = _read_interaction(record, decoder)
                if inter.key in seen and not is_partial:
                    raise DecodeError(f"duplicate recording for rollout {inter.rollout!r} turn "
                                      f"{inter.seq} (first at line {seen[inter.key]})")
                seen[inter.key] = number
                if inter.rollout is not None:
                    bodies[(inter.rollout, inter.seq)] = inter.request.get("body")
                    rollouts.setdefault(inter.rollout, RolloutRecord(inter.rollout))
                interactions.append(inter)
            elif kind == "tool":
                call = _read_tool_call(record)
                if call.key in seen_tools and not is_partial:
                    raise DecodeError(f"duplicate tool call {call.seq} of rollout "
                                      f"{call.rollout!r} (first at line {seen_tools[call.key]})")
                seen_tools[call.key] = number
                if call.rollout is not None:
                    rollouts.setdefault(call.rollout, RolloutRecord(call.rollout))
                tool_calls.append(call)
            elif kind == "outcome":
                fields = {k: v for k, v in record.items() if k not in ("type", "rollout")}
                rid = _rollout_id(record["rollout"])
                rollouts.setdefault(rid, RolloutRecord(rid)).outcome.update(fields)
            elif kind == "annotate":
                header = header.merged(dict(record.get("fields") or {}))
            else:
                raise DecodeError(f"unknown record type {kind!r}")
        except (DecodeError, KeyError, TypeError, ValueError, ValidationError) as exc:
            raise CassetteError(f"bad {kind or 'record'} record: {_short(exc)}", path=path,
                                line=number, hint="restore the file from git, or "
                                + _RERECORD) from exc
    if header is None and is_partial:  # killed before its header line was whole
        return Cassette(path, CassetteHeader(), [], {}, complete=False)
    if header is None:
        raise CassetteError("empty file: no header line", path=path, line=1,
                            hint=_RERECORD[0].upper() + _RERECORD[1:])
    if is_partial:
        interactions = _renumber(interactions)
    for inter in interactions:
        if inter.rollout is not None:
            rollouts[inter.rollout].interactions.append(inter)
    tool_calls.sort(key=lambda c: (c.rollout or "", c.seq))
    for call in tool_calls:
        if call.rollout is not None:
            rollouts[call.rollout].tool_calls.append(call)
    return Cassette(path, header, interactions, rollouts, complete=not is_partial,
                    tool_calls=tool_calls)


def _kind_of(line: str) -> str:
    record = json.loads(line)
    kind = record.get("type") if isinstance(record, dict) else None
    return str(kind) if kind else "record"


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _read_header(path: Path, number: int, record: Any) -> CassetteHeader:
    if not isinstance(record, dict) or record.get("type") != "header":
        raise CassetteError("line 1 is not a cassette header", path=path, line=number,
                            hint="is this a hermes-replay cassette? If so, " + _RERECORD)
    version = record.get("schema_version")
    if not isinstance(version, int) or version < 1:
        raise CassetteError(f"bad schema_version {version!r}", path=path, line=number,
                            hint=_RERECORD)
    if version > SCHEMA_VERSION:
        raise CassetteError(
            f"cassette schema {version} is newer than this hermes-replay reads "
            f"(schema {SCHEMA_VERSION}, hermes-replay {_harness_version()})",
            path=path, line=number,
            hint="upgrade hermes-replay, or " + _RERECORD + " with this version")
    try:
        return CassetteHeader.model_validate(record)
    except ValidationError as exc:
        raise CassetteError(f"bad header: {_short(exc)}", path=path, line=number,
                            hint=_RERECORD) from exc


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _rollout_id(value: Any) -> str:
    """Rollout ids are printed by ls/show/miss reports: no control characters (a cassette
    must not be able to send escape sequences to the reader's terminal)."""
    rid = str(value)
    if _CONTROL.search(rid):
        raise DecodeError(f"rollout id {rid!r} has control characters")
    return rid


def _read_interaction(record: dict, decoder: BodyDecoder) -> Interaction:
    # ``record`` is freshly parsed and ours: completed in place, not copied (this runs
    # once per interaction of every cassette a session loads)
    rollout = record.get("rollout")
    if rollout is not None:
        _rollout_id(rollout)
    del record["type"]
    request, response = record["request"], record["response"]
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise DecodeError("request and response must be JSON objects")
    request["body"] = decoder.decode(rollout, request.get("body"))
    request["path"] = request_path(str(request.get("url", "")))
    response.setdefault("body", None)    # readers may rely on both keys being present
    response.setdefault("chunks", None)
    return Interaction.model_validate(record)


def _read_tool_call(record: dict) -> ToolCall:
    rollout = record.get("rollout")
    if rollout is not None:
        _rollout_id(rollout)
    name = record.get("name")
    if not isinstance(name, str) or _CONTROL.search(name):
        raise DecodeError(f"tool name {name!r} is not a plain string")
    del record["type"]
    return ToolCall.model_validate(record)


def _renumber(interactions: list[Interaction]) -> list[Interaction]:
    """A ``.partial`` holds provisional sequence numbers (order of issue, with gaps where an
    attempt failed); rank them 0..n-1 per rollout as a finished cassette would."""
    by_rollout: dict[str | None, list[Interaction]] = {}
    for inter in interactions:
        by_rollout.setdefault(inter.rollout, []).append(inter)
    out = []
    for group in by_rollout.values():
        for rank, inter in enumerate(sorted(group, key=lambda i: i.seq)):
            out.append(inter.model_copy(update={"seq": rank}))
    return out


# ----------------------------------------------------------------------------- writing


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    return repr(value)


def _interaction_records(encoder: BodyEncoder, inter: Interaction) -> list[dict[str, Any]]:
    request = {k: v for k, v in inter.request.items() if k != "path"}
    blobs, body = encoder.encode(inter.rollout, inter.seq, request.get("body"))
    request["body"] = body
    response = {k: v for k, v in inter.response.items()
                if v is not None or (k == "body" and inter.response.get("chunks") is None)}
    if encoder.shared:  # compacted: replies recur in the next request; store them once
        more, response = encoder.encode_plain(response)
        blobs = [*blobs, *more]
    record = {"type": "interaction", "rollout": inter.rollout, "seq": inter.seq,
              "kind": inter.kind, "fingerprint": inter.fingerprint,
              "duration_ms": round(inter.duration_ms, 1), "request": request,
              "response": response}
    return [*blobs, record]


def _tool_records(encoder: BodyEncoder, call: ToolCall) -> list[dict[str, Any]]:
    blobs, record = encoder.encode_plain(json.loads(_dumps(call.record())))
    return [*blobs, record]


def _outcome_records(encoder: BodyEncoder, rollout: str, outcome: dict) -> list[dict[str, Any]]:
    blobs, fields = encoder.encode_plain(json.loads(_dumps(outcome)))
    return [*blobs, {"type": "outcome", "rollout": rollout, **fields}]


class CassetteWriter:
    """Appends records to ``<path>.partial``, one flushed line each (crash-safe journal)."""

    def __init__(self, path: str | Path, header: CassetteHeader) -> None:
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        self._encoder = BodyEncoder()
        self._file: IO[str] | None = _open_journal(self.partial)
        _remove_stale_rewrites(self.path)  # safe now: we hold the journal lock
        self._write([header.model_dump(mode="json")])

    def _write(self, records: Iterable[dict[str, Any]]) -> None:
        if self._file is None:
            raise ValueError(f"{self.partial}: writer already closed")
        self._file.write("".join(_dumps(r) + "\n" for r in records))
        self._file.flush()

    def interaction(self, inter: Interaction) -> None:
        self._write(_interaction_records(self._encoder, inter))

    def outcome(self, rollout: str, outcome: dict[str, Any]) -> None:
        self._write(_outcome_records(self._encoder, rollout, outcome))

    def tool_call(self, call: ToolCall) -> None:
        self._write(_tool_records(self._encoder, call))

    def annotate(self, fields: dict[str, Any]) -> None:
        self._write([{"type": "annotate", "fields": json.loads(_dumps(fields))}])

    def retarget(self, path: str | Path) -> None:
        """Write the finished cassette to ``path`` instead (a shard named after its worker,
        known only once the worker registered); the journal keeps its name until then."""
        self.path = Path(path)

    def close(self) -> None:
        """Stop writing and leave the ``.partial`` as it is (interrupted recording)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def commit(self, header: CassetteHeader, interactions: list[Interaction],
               outcomes: dict[str, dict[str, Any]],
               tool_calls: list[ToolCall] | None = None) -> None:
        """Write the final, compacted cassette over ``path`` atomically; drop the journal.
        The journal's lock is held until then, so no other recorder starts in between."""
        if self._file is not None:
            self._file.flush()
        write_cassette(self.path, header, interactions, outcomes, tool_calls)
        self.partial.unlink(missing_ok=True)
        self.close()


def _open_journal(partial: Path) -> IO[str]:
    """Open ``<path>.partial`` for a new recording: never through a symlink, and only if no
    other process is recording the same cassette (an exclusive lock, released on exit —
    also by a crash, so a stale journal never blocks)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(partial, flags, 0o644)
    except OSError as exc:
        raise CassetteError(f"cannot open the recording journal: {exc.strerror}", path=partial,
                            hint="if it is a symlink or not a regular file, remove it and "
                            "record again") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise CassetteError(
            "another process is recording this cassette right now", path=partial,
            hint="wait for that recording to finish, or record into another path") from exc
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "w", encoding="utf-8")


def _rewrite_tmp(path: Path, pid: int) -> Path:
    return path.with_name(f".{path.name}.{pid}.tmp")


def _remove_stale_rewrites(path: Path) -> None:
    """Delete temp files of final rewrites whose writer died (killed between writing the temp
    file and renaming it): they are never read as cassettes, but they pile up next to one."""
    prefix, suffix = f".{path.name}.", ".tmp"
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid_text = tmp.name[len(prefix):-len(suffix)]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except OSError:  # alive, but not ours to signal: leave it
            pass


def _ordered(interactions: list[Interaction], outcomes: dict[str, dict[str, Any]],
             tool_calls: list[ToolCall]) -> Iterator[tuple[str, Any]]:
    scopeless = sorted((i for i in interactions if i.rollout is None), key=lambda i: i.seq)
    for inter in scopeless:
        yield "interaction", inter
    for call in sorted((c for c in tool_calls if c.rollout is None), key=lambda c: c.seq):
        yield "tool", call
    grouped: dict[str, list[Interaction]] = {}
    for inter in interactions:
        if inter.rollout is not None:
            grouped.setdefault(inter.rollout, []).append(inter)
    tools: dict[str, list[ToolCall]] = {}
    for call in tool_calls:
        if call.rollout is not None:
            tools.setdefault(call.rollout, []).append(call)
    for rid in sorted(set(grouped) | set(outcomes) | set(tools)):
        # each turn, then the tool calls answering it: the file reads as the rollout ran
        pending = sorted(tools.get(rid, []), key=lambda c: c.seq)
        for inter in sorted(grouped.get(rid, []), key=lambda i: i.seq):
            while pending and pending[0].turn < inter.seq and pending[0].source == "agent":
                yield "tool", pending.pop(0)
            yield "interaction", inter
        for call in pending:
            yield "tool", call
        if outcomes.get(rid):
            yield "outcome", (rid, outcomes[rid])


def write_cassette(path: str | Path, header: CassetteHeader, interactions: list[Interaction],
                   outcomes: dict[str, dict[str, Any]] | None = None,
                   tool_calls: list[ToolCall] | None = None, *,
                   encoder: BodyEncoder | None = None) -> None:
    """Write a complete cassette atomically (temp file, fsync, ``os.replace``); zstd-compressed
    if ``path`` ends in ``.zst``. ``encoder``: a fresh one with other settings (compact)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    encoder = encoder or BodyEncoder()
    tmp = _rewrite_tmp(path, os.getpid())
    try:
        with open_for_write(tmp, compress=wants_compression(path)) as fh:
            fh.write(_dumps(header.model_dump(mode="json")) + "\n")
            for kind, item in _ordered(interactions, outcomes or {}, tool_calls or []):
                if kind == "interaction":
                    records = _interaction_records(encoder, item)
                elif kind == "tool":
                    records = _tool_records(encoder, item)
                else:
                    records = _outcome_records(encoder, *item)
                fh.write("".join(_dumps(r) + "\n" for r in records))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
