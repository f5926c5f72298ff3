"""Reading a cassette file: parse, validate, decode bodies; every error names file:line.

A ``.partial`` (an interrupted recording's journal) reads too: its cut-off last line is
dropped and its provisional sequence numbers are ranked as a finished cassette's would be.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hermes_replay._cassette.files import read_lines
from hermes_replay._cassette.format import BodyDecoder, DecodeError
from hermes_replay._cassette.matching import request_path
from hermes_replay._cassette.model import (
    SCHEMA_VERSION,
    Cassette,
    CassetteHeader,
    Interaction,
    RolloutRecord,
    harness_version,
    partial_path,
)
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._errors import CassetteError

__all__ = ["NOT_FOUND", "Records", "load_cassette", "paused_gc", "text_lines"]

_RERECORD = "re-record it with `hermes-replay record …` (or mode='record')"


def load_cassette(path: str | Path) -> Cassette:
    """Read a cassette file (or a ``.partial`` one); raises ``CassetteError`` naming file:line.

    ``.jsonl`` and zstd-compressed ``.jsonl.zst`` read alike (see ``_cassette.files``). A folder of
    shards is read by ``_load.load_cassette`` (the public one).
    """
    path = Path(path)
    is_partial = path.name.endswith(".partial")
    lines, truncated_tail = text_lines(path)
    with paused_gc():
        records = Records(path, is_partial=is_partial)
        for number, line in enumerate(lines, start=1):
            last = is_partial and truncated_tail and number == len(lines)
            record = records.parse(number, line, last_of_partial=last)
            if record is not _SKIP:
                records.add(number, line, record)
        return records.cassette()


def text_lines(path: Path) -> tuple[list[str], bool]:
    """The file's lines as text (no final empty line), and whether its last line was cut off
    (no newline after it). Missing, unreadable or non-UTF-8 files raise ``CassetteError``."""
    if not path.exists():
        hint = f"check the path, or {_RERECORD} (mode='auto' records it)"
        if partial_path(path).exists():
            hint = (f"an interrupted recording is in {partial_path(path)}: inspect it "
                    f"(`hermes-replay show {partial_path(path)}`) and rename it to {path.name} "
                    f"to use what it holds, or {_RERECORD}")
        raise CassetteError("no such cassette", path=path, hint=hint)
    try:
        raw_lines = read_lines(path)  # zstd streamed, both size caps checked (_cassette.files)
    except OSError as exc:
        raise CassetteError(f"cannot read the file: {exc}", path=path,
                            hint="restore it from git, or " + _RERECORD) from exc
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CassetteError(f"not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                                "line)", path=path, line=number,
                                hint="the file is damaged; restore it from git, or "
                                + _RERECORD) from exc
    del raw_lines
    truncated_tail = bool(lines) and lines[-1] != ""
    if lines and lines[-1] == "":
        lines.pop()
    return lines, truncated_tail


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


_SKIP = object()  # ``Records.parse``: nothing to add (a blank line, a partial's cut-off tail)
NOT_FOUND = object()  # ``Records``' ``earlier``: no such turn before this line


class Records:
    """The records of one file read in order, and what they build: every rule a line must
    keep and the ``CassetteError`` (file:line) for one that breaks it.

    ``load_cassette`` feeds it every line; the replay's deferred reader
    (``_cassette.deferred``) feeds it the lines it does not defer, and its own decoder, so both
    readers hold lines to the same rules. A delta's earlier turn is looked up in ``bodies``
    first, then through the decoder's own lookup.
    """

    def __init__(self, path: Path, *, is_partial: bool,
                 make_decoder: Callable[[Callable[[str, int], Any]], BodyDecoder] = BodyDecoder,
                 earlier: Callable[[str, int], Any] | None = None) -> None:
        self.path, self.is_partial = path, is_partial
        self.bodies: dict[tuple[str, int], Any] = {}

        def lookup(rollout: str, seq: int) -> Any:
            if (rollout, seq) in self.bodies:
                return self.bodies[(rollout, seq)]
            found = earlier(rollout, seq) if earlier is not None else NOT_FOUND
            if found is NOT_FOUND:
                raise DecodeError(f"refers to turn {seq} of rollout {rollout!r}, not found "
                                  "earlier")
            return found

        self.decoder = make_decoder(lookup)
        self._json = json.JSONDecoder(object_hook=self.decoder.object_hook).decode  # built once
        self.header: CassetteHeader | None = None
        self.interactions: list[Any] = []
        self.rollouts: dict[str, RolloutRecord] = {}
        self.seen: dict[tuple[str | None, int], int] = {}
        self.tool_calls: list[ToolCall] = []
        self.seen_tools: dict[tuple[str | None, int], int] = {}
        self.numbers: dict[int, int] = {}  # id(interaction) -> line, until keys are final

    def parse(self, number: int, line: str, *, last_of_partial: bool = False) -> Any:
        """The line's JSON (blobs resolved), or ``_SKIP``."""
        if not line.strip():
            return _SKIP
        try:
            return self._json(line)
        except DecodeError as exc:  # raised by the blob hook: the JSON itself is fine
            raise self.bad(number, f"bad {_kind_of(line)} record: {_short(exc)}") from exc
        except (ValueError, RecursionError) as exc:  # also: nesting too deep, huge numbers
            if last_of_partial:
                return _SKIP  # the write the crash interrupted; everything before it is whole
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else _short(exc)
            raise CassetteError(f"not valid JSON ({why})", path=self.path, line=number,
                                hint="the file is damaged; restore it from git, or "
                                + _RERECORD) from exc

    def bad(self, number: int, what: str) -> CassetteError:
        return CassetteError(what, path=self.path, line=number,
                             hint="restore the file from git, or " + _RERECORD)

    def add(self, number: int, line: str, record: Any) -> None:
        """Take one parsed record (line 1: the header)."""
        kind = record.get("type") if isinstance(record, dict) else None
        if self.header is None:
            self.header = _read_header(self.path, number, record)
            return
        try:
            if kind == "blob":
                self.decoder.add_blob(str(record["id"]), record["value"])
            elif kind == "interaction":
                inter = _read_interaction(record, self.decoder)
                self.add_interaction(number, inter)
                if inter.rollout is not None:
                    self.bodies[(inter.rollout, inter.seq)] = inter.request.get("body")
            elif kind == "tool":
                call = _read_tool_call(record)
                if call.key in self.seen_tools and not self.is_partial:
                    raise DecodeError(f"duplicate tool call {call.seq} of rollout "
                                      f"{call.rollout!r} (first at line "
                                      f"{self.seen_tools[call.key]})")
                self.seen_tools[call.key] = number
                if call.rollout is not None:
                    self.rollouts.setdefault(call.rollout, RolloutRecord(call.rollout))
                self.tool_calls.append(call)
            elif kind == "outcome":
                fields = {k: v for k, v in record.items() if k not in ("type", "rollout")}
                rid = _rollout_id(record["rollout"])
                self.rollouts.setdefault(rid, RolloutRecord(rid)).outcome.update(fields)
            elif kind == "annotate":
                self.header = self.header.merged(dict(record.get("fields") or {}))
            else:
                raise DecodeError(f"unknown record type {kind!r}")
        except (DecodeError, KeyError, TypeError, ValueError, ValidationError) as exc:
            raise self.bad(number, f"bad {kind or 'record'} record: {_short(exc)}") from exc

    def add_interaction(self, number: int, inter: Any) -> None:
        """File one interaction (or a deferred one: anything with ``key`` and ``rollout``)."""
        if inter.key in self.seen and not self.is_partial:
            raise DecodeError(f"duplicate recording for rollout {inter.rollout!r} turn "
                              f"{inter.seq} (first at line {self.seen[inter.key]})")
        self.seen[inter.key] = number
        self.numbers[id(inter)] = number
        if inter.rollout is not None:
            self.rollouts.setdefault(inter.rollout, RolloutRecord(inter.rollout))
        self.interactions.append(inter)

    def cassette(self) -> Cassette:
        """The cassette the records make (after the last line)."""
        path, header, interactions = self.path, self.header, self.interactions
        if header is None and self.is_partial:  # killed before its header line was whole
            return Cassette(path, CassetteHeader(), [], {}, complete=False)
        if header is None:
            raise CassetteError("empty file: no header line", path=path, line=1,
                                hint=_RERECORD[0].upper() + _RERECORD[1:])
        if self.is_partial:
            interactions = _renumber(interactions, self.numbers)
        lines = {inter.key: self.numbers[id(inter)] for inter in interactions}
        for inter in interactions:
            if inter.rollout is not None:
                self.rollouts[inter.rollout].interactions.append(inter)
        self.tool_calls.sort(key=lambda c: (c.rollout or "", c.seq))
        for call in self.tool_calls:
            if call.rollout is not None:
                self.rollouts[call.rollout].tool_calls.append(call)
        return Cassette(path, header, interactions, self.rollouts, complete=not self.is_partial,
                        tool_calls=self.tool_calls, lines=lines)


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
            f"(schema {SCHEMA_VERSION}, hermes-replay {harness_version()})",
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


def _renumber(interactions: list[Interaction], numbers: dict[int, int]) -> list[Interaction]:
    """A ``.partial`` holds provisional sequence numbers (order of issue, with gaps where an
    attempt failed); rank them 0..n-1 per rollout as a finished cassette would. ``numbers``
    (``id`` → line) gets the line of each copy."""
    by_rollout: dict[str | None, list[Interaction]] = {}
    for inter in interactions:
        by_rollout.setdefault(inter.rollout, []).append(inter)
    out = []
    for group in by_rollout.values():
        for rank, inter in enumerate(sorted(group, key=lambda i: i.seq)):
            copy = inter.model_copy(update={"seq": rank})
            numbers[id(copy)] = numbers[id(inter)]
            out.append(copy)
    return out


# ----------------------------------------------------------------------------- writing
