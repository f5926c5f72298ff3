"""Writing a cassette: the crash-safe journal (``<path>.partial``) and the final rewrite.

The journal gets one flushed line per record while recording and holds an exclusive lock, so
no second recorder writes the same cassette; the final file is written in a stable order to a
temp file, fsynced and renamed over ``<path>`` only on a clean close, so a crash never
touches an existing cassette.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from hermes_replay._cassette.files import (
    is_compressed,
    open_for_write,
    read_bytes,
    wants_compression,
)
from hermes_replay._cassette.format import BodyEncoder
from hermes_replay._cassette.model import CassetteHeader, Interaction, partial_path
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._errors import CassetteError

__all__ = ["CassetteWriter", "file_records", "rewrite_header", "write_cassette"]


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
    if inter.stage is not None:  # only reward calls carry one: other records stay as they were
        record["stage"] = inter.stage
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
        self._claim: tuple[int, Path, bool] | None = None  # see ``retarget``
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
        known only once the worker registered); the journal keeps its name until then.

        ``path`` is claimed with the lock a recorder of ``path`` itself would take, so two
        workers that came up with one identity fail at once instead of the last one to
        finish silently replacing the other's shard."""
        path = Path(path)
        if path == self.path:
            return
        claim = partial_path(path)
        existed = claim.exists()
        fd = _locked(claim, busy=f"another recorder is writing {path.name} right now: two "
                     "workers with one identity?",
                     hint="give every worker its own identity (--worker NAME, or "
                     "HERMES_REPLAY_WORKER), then record again")
        self._release_claim()
        self._claim = (fd, claim, existed)
        self.path = path

    def _release_claim(self, *, committed: bool = False) -> None:
        if self._claim is None:
            return
        fd, claim, existed = self._claim
        self._claim = None
        try:
            # committed: the file it names is written, so the claim (or a dead recorder's
            # journal of that file, which we hold the lock of) is superseded, as a recorder
            # of that file would have truncated it; otherwise only an empty one we made goes
            if committed or (not existed and os.fstat(fd).st_size == 0):
                claim.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Stop writing and leave the ``.partial`` as it is (interrupted recording)."""
        self._release_claim()
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
        self._release_claim(committed=True)
        self.close()


def _open_journal(partial: Path) -> IO[str]:
    """Open ``<path>.partial`` for a new recording: never through a symlink, and only if no
    other process is recording the same cassette (an exclusive lock, released on exit —
    also by a crash, so a stale journal never blocks)."""
    fd = _locked(partial, busy="another process is recording this cassette right now",
                 hint="wait for that recording to finish, or record into another path")
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "w", encoding="utf-8")


def _locked(partial: Path, *, busy: str, hint: str) -> int:
    """A descriptor of ``partial`` (created if missing, never through a symlink) holding its
    exclusive lock; ``CassetteError(busy)`` when another recorder holds it."""
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
        raise CassetteError(busy, path=partial, hint=hint) from exc
    return fd


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


def file_records(interactions: list[Interaction], outcomes: dict[str, dict[str, Any]],
                 tool_calls: list[ToolCall], encoder: BodyEncoder) -> Iterator[dict[str, Any]]:
    """Every record after the header, in file order, as ``encoder`` stores them (``compact``
    counts repeated strings in exactly what would be written)."""
    for kind, item in _ordered(interactions, outcomes, tool_calls):
        if kind == "interaction":
            yield from _interaction_records(encoder, item)
        elif kind == "tool":
            yield from _tool_records(encoder, item)
        else:
            yield from _outcome_records(encoder, *item)


def write_cassette(path: str | Path, header: CassetteHeader, interactions: list[Interaction],
                   outcomes: dict[str, dict[str, Any]] | None = None,
                   tool_calls: list[ToolCall] | None = None, *,
                   encoder: BodyEncoder | None = None,
                   check: Callable[[Path], None] | None = None) -> None:
    """Write a complete cassette atomically (temp file, fsync, ``os.replace``); zstd-compressed
    if ``path`` ends in ``.zst``. ``encoder``: a fresh one with other settings (compact).
    ``check(temp_file)`` runs before the rename: if it raises, ``path`` is left as it was.

    Temp files of earlier writes of ``path`` whose writer was killed are removed first (their
    process is gone), so a SIGKILL'd ``merge``/``compact`` leaves nothing behind for long."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_rewrites(path)
    encoder = encoder or BodyEncoder()
    tmp = _rewrite_tmp(path, os.getpid())
    try:
        with open_for_write(tmp, compress=wants_compression(path)) as fh:
            fh.write(_dumps(header.model_dump(mode="json")) + "\n")
            for record in file_records(interactions, outcomes or {}, tool_calls or [], encoder):
                fh.write(_dumps(record) + "\n")
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def cannot_write(exc: OSError, path: Path, what: str) -> CassetteError:
    """A failed write of a whole cassette (disk full, permissions) as a user-facing error:
    which file, why, and that nothing was replaced (``write_cassette`` renames only a
    complete file)."""
    return CassetteError(
        f"cannot write {what}: {exc.strerror or exc} (errno {exc.errno})", path=path,
        hint=f"free disk space or fix the folder's permissions and run it again; {path} "
             "(if it existed) is unchanged and no temp file is left")


def rewrite_header(path: str | Path, header: CassetteHeader) -> None:
    """Replace line 1 of a complete cassette, every other line kept byte for byte (a header
    edit such as ``hermes-replay normalize`` must not re-encode the recordings); atomic like
    ``write_cassette``, compressed again if it was."""
    path = Path(path)
    data = read_bytes(path)
    _, newline, rest = data.partition(b"\n")
    tmp = _rewrite_tmp(path, os.getpid())
    try:
        with open_for_write(tmp, compress=is_compressed(path)) as fh:
            fh.write(_dumps(header.model_dump(mode="json")) + "\n")
            fh.flush()
            fh.buffer.write(rest if newline else b"")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
