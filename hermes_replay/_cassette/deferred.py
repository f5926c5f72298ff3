"""Reading a cassette for replay with its bodies decoded on first use, not at start.

Why: a replay session's start used to parse every line of the file — 0.7 s of CPU for
10,000 interactions, most of it ``json`` building request and response bodies that are needed
one at a time, when their turn is replayed. A replay needs at start only what the index
files recordings under: each interaction's rollout, seq, kind, stored fingerprint and URL.
The recorder writes those first, in a fixed order, so they are read off the start of the
line here, and the line itself is parsed when its recording is first looked at.

What is still checked when, for a file read this way (a cassette is untrusted input):

- at start, every line: UTF-8, the size caps, the header, duplicate (rollout, seq) keys, and
  every line that is not an interaction or blob line in the recorder's own layout (those are
  parsed as ``load_cassette`` parses them: outcomes, tool calls, hand-edited lines);
- at first use of a recording (its turn is replayed, or a miss is diffed against it): its
  line and every earlier line of its rollout, and the blobs they refer to, by the same rules
  and with the same file:line errors as ``load_cassette``; the fields read at start must be
  the ones the line holds (a key given twice is refused);
- when the replay ends (``check_all``): every line not used yet, so a damaged recording that
  the run never reached still fails the replay, naming its line.

``verify``, ``show``, ``diff`` and every other reader still read the whole file up front
(``load_cassette``). Files this does not defer fall back to it: a ``.partial``, a folder of
shards, fingerprints written by another matcher (they are recomputed from the bodies), or an
interaction line not in the recorder's layout (edited by hand, say). A line in that layout that
gives a field the index reads twice (JSON lets the last copy win) is refused at first use.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hermes_replay._cassette.format import BodyDecoder, DecodeError
from hermes_replay._cassette.model import Cassette, CassetteHeader, Interaction
from hermes_replay._cassette.read import (
    NOT_FOUND,
    Records,
    _read_interaction,
    _short,
    paused_gc,
    text_lines,
)
from hermes_replay._errors import CassetteError

__all__ = ["DeferredInteraction", "DeferredReader", "read_deferred"]

_PLAIN = r'[^"\\\x00-\x1f\x7f]*'  # a JSON string with no escapes and no control characters
# what ``_cassette.write`` puts first on an interaction line, in its order
_INTERACTION = re.compile(
    r'\{"type": "interaction", "rollout": (?:null|"(' + _PLAIN + r')"), "seq": (0|[1-9]\d{0,8}), '
    r'"kind": "(' + _PLAIN + r')", "fingerprint": "([0-9a-f]+)", "duration_ms": [-0-9.e]+, '
    r'"request": \{"method": "[A-Z]+", "url": "(' + _PLAIN + r')", ')
_BLOB = re.compile(r'\{"type": "blob", "id": "(' + _PLAIN + r')", "value": ')
_STAGE = re.compile(r', "stage": "(' + _PLAIN + r')"\}\Z')  # the last field, if any


class DeferredInteraction:
    """An interaction whose line is parsed on first use of ``request``/``response`` (or of
    anything else an ``Interaction`` has: it stands in for one)."""

    __slots__ = ("_reader", "_real", "checked", "fingerprint", "key", "kind", "line", "rollout",
                 "seq", "stage", "url")

    def __init__(self, reader: DeferredReader, line: int, rollout: str | None, seq: int,
                 kind: str, fingerprint: str, url: str, stage: str | None) -> None:
        self._reader, self._real = reader, None
        self.checked = False  # its line has been decoded once and found whole
        self.line, self.rollout, self.seq, self.kind = line, rollout, seq, kind
        self.fingerprint, self.url, self.stage = fingerprint, url, stage
        self.key = (rollout, seq)

    @property
    def decoded(self) -> bool:
        """Its line has been decoded and found whole (the decoded form may have been let go
        since: ``DeferredReader.release``)."""
        return self.checked

    def load(self) -> Interaction:
        """The interaction its line holds; ``CassetteError`` (file:line) if it is damaged."""
        real = self._real  # read once: a rollout answered in another thread may be let go
        return real if real is not None else self._reader.decode(self)

    @property
    def request(self) -> dict[str, Any]:
        return self.load().request

    @property
    def response(self) -> dict[str, Any]:
        return self.load().response

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy/pickle protocols: not an interaction's to answer
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __repr__(self) -> str:
        return f"DeferredInteraction({self.rollout!r}, {self.seq}, line {self.line})"


class _Blob:
    __slots__ = ("line", "text", "value")

    def __init__(self, line: int, text: str, value: Any) -> None:
        self.line, self.text, self.value = line, text, value  # NOT_FOUND: still ``text``


class DeferredReader:
    """One file's lines, indexed at start and decoded on demand (thread-safe: a replay's
    requests may come from several threads). ``cassette`` is None when the file must be read
    whole instead (see the module docstring)."""

    def __init__(self, path: Path, lines: list[str],
                 matcher_signature: str | Callable[[CassetteHeader], str]) -> None:
        self.path = path
        self._signature = matcher_signature
        self._lines: dict[int, str] = {}  # line number -> text, until decoded
        self._blobs: dict[str, list[_Blob]] = {}  # id -> its definitions, in line order
        self._by_rollout: dict[str | None, list[DeferredInteraction]] = {}
        self._by_key: dict[tuple[str | None, int], DeferredInteraction] = {}
        self._done: dict[str | None, int] = {}  # rollout -> how many of its lines are decoded
        self._lock = threading.RLock()
        self._now = 0  # the line being decoded: what it refers to must come before it
        self._releasable = False  # lines kept as text after decoding (``allow_release``)
        self.error: CassetteError | None = None  # the first damaged line found after start
        self._records = Records(path, is_partial=False, make_decoder=self._decoder,
                                earlier=self._earlier_body)
        self.cassette = self._scan(lines)

    # ------------------------------------------------------------------ start

    def _decoder(self, lookup: Callable[[str, int], Any]) -> BodyDecoder:
        reader = self

        class _Decoder(BodyDecoder):
            def object_hook(self, obj: dict[str, Any]) -> Any:
                if len(obj) == 1 and "$blob" in obj:
                    return reader._blob(obj["$blob"])
                return obj

            def add_blob(self, ident: str, value: Any) -> None:  # a blob line read whole
                reader._blobs.setdefault(ident, []).append(_Blob(reader._now, "", value))

        return _Decoder(lookup)

    def _scan(self, lines: list[str]) -> Cassette | None:
        records = self._records
        for number, line in enumerate(lines, start=1):
            self._now = number
            if number > 1 and line.startswith('{"type": "interaction", '):
                inter = self._interaction(number, line)
                if inter is None:
                    return None  # not the recorder's layout: read the file whole
                try:
                    records.add_interaction(number, inter)
                except DecodeError as exc:
                    raise records.bad(number, f"bad interaction record: {_short(exc)}") \
                        from exc
                self._lines[number] = line
                self._by_rollout.setdefault(inter.rollout, []).append(inter)
                self._by_key[inter.key] = inter
                continue
            if number > 1 and line.endswith("}"):
                m = _BLOB.match(line)
                if m is not None:
                    self._blobs.setdefault(m[1], []).append(_Blob(number, line, NOT_FOUND))
                    continue
            record = records.parse(number, line)
            if isinstance(record, dict) and record.get("type") == "interaction":
                return None  # an interaction in another layout: read the file whole
            records.add(number, line, record)
            header = records.header
            if number == 1 and (header is None or header.extra.get("matcher") != (
                    self._signature if isinstance(self._signature, str)
                    else self._signature(header))):
                return None  # the fingerprints are recomputed from every body: read it whole
        return records.cassette()

    def _interaction(self, number: int, line: str) -> DeferredInteraction | None:
        m = _INTERACTION.match(line)
        if m is None or not line.endswith("}"):
            return None
        stage, end = None, len(line)
        if line.endswith('"}'):  # a string is the record's last value: the recorder's stage
            end = line.rfind(', "stage": "')
            found = _STAGE.match(line, end) if end > m.end() else None
            if found is None:
                return None
            stage = found[1]
        if line.find('"stage": ', m.end(), end) != -1:
            return None  # somewhere else than the recorder puts it (or in a body): read whole
        return DeferredInteraction(self, number, m[1], int(m[2]), m[3], m[4], m[5], stage)

    # ------------------------------------------------------------------ on demand

    def _blob(self, ident: Any) -> Any:
        """The value of blob ``ident`` as defined last before the line being decoded."""
        defs = self._blobs.get(ident) if isinstance(ident, str) else None
        blob = None
        for candidate in defs or ():
            if candidate.line >= self._now:
                break
            blob = candidate
        if blob is None:
            raise DecodeError(f"refers to blob {ident!r}, which no earlier line defines")
        if blob.value is NOT_FOUND:
            blob.value = self._decode_blob(ident, blob)
        return blob.value

    def _decode_blob(self, ident: str, blob: _Blob) -> Any:
        records, outer = self._records, self._now
        self._now = blob.line
        try:
            record = records.parse(blob.line, blob.text)
            if not isinstance(record, dict) or record.get("type") != "blob" \
                    or record.get("id") != ident or "value" not in record:
                raise records.bad(blob.line, "bad blob record: its id or value is not the one "
                                  "its line starts with (a field given twice?)")
            blob.text = ""
            return record["value"]
        except RecursionError as exc:  # blobs referring to blobs, thousands deep
            raise records.bad(blob.line, "bad blob record: blobs nested too deep") from exc
        finally:
            self._now = outer

    def _earlier_body(self, rollout: str, seq: int) -> Any:
        """A delta's earlier turn: the interaction of the same rollout on an earlier line
        (decoded already: ``decode`` goes through a rollout's lines in order)."""
        inter = self._by_key.get((rollout, seq))
        if inter is None or inter.line >= self._now or inter._real is None:
            return NOT_FOUND
        return inter._real.request.get("body")

    def decode(self, target: DeferredInteraction) -> Interaction:
        """Decode ``target``'s line and, first, the earlier lines of its rollout (a turn's
        body is a delta of its rollout's earlier turns); then the rest of its rollout, which
        the run is about to ask for (see ``_decode_ahead``). Returns what ``target`` holds."""
        with self._lock:
            if target._real is not None:
                return target._real
            if target.rollout is None:  # scope-less: no deltas, only itself
                self._decode_one(target)
                return target._real  # type: ignore[return-value]
            group = self._by_rollout[target.rollout]
            i = self._done.get(target.rollout, 0)
            while i < len(group):
                self._decode_one(group[i])
                i += 1
                self._done[target.rollout] = i
                if group[i - 1] is target:
                    break
            self._decode_ahead(target.rollout, group)
            return target._real  # type: ignore[return-value]  # set, or _decode_one raised

    def _decode_ahead(self, rollout: str, group: list[DeferredInteraction]) -> None:
        """Decode the rest of ``rollout``'s lines now, in one batch.

        Why: a replay asks for a rollout's turns one after another, each between long runs of
        the SDK's and the environment's own code; one line decoded at a time ran at half the
        speed of the same lines decoded together (the decoder's code and the blobs it
        shares fall out of the processor's caches in between). A damaged line met here is
        left for the request that uses it, which fails naming it as before; nothing is
        decoded that the end of the replay would not decode anyway (``check_all``)."""
        i = self._done.get(rollout, 0)
        while i < len(group):
            try:
                self._decode_one(group[i], ahead=True)
            except CassetteError:
                return
            i += 1
            self._done[rollout] = i

    def _decode_one(self, inter: DeferredInteraction, ahead: bool = False) -> None:
        records, number = self._records, inter.line
        if inter._real is not None:
            return
        if self.error is not None and self.error.line == number:
            raise self.error
        self._now = number
        try:
            try:
                record = records.parse(number, self._lines[number])
                if not isinstance(record, dict) or record.get("type") != "interaction":
                    raise DecodeError("its type is not the one its line starts with")
                real = _read_interaction(record, records.decoder)
            except RecursionError as exc:
                raise DecodeError("blobs nested too deep") from exc
            except (DecodeError, KeyError, TypeError, ValueError, ValidationError) as exc:
                raise records.bad(number, f"bad interaction record: {_short(exc)}") from exc
            seen = (real.rollout, real.seq, real.kind, real.fingerprint,
                    real.request.get("url"), real.__dict__.get("stage"))
            if seen != (inter.rollout, inter.seq, inter.kind, inter.fingerprint, inter.url,
                        inter.stage):
                raise records.bad(number, "bad interaction record: the fields its line starts "
                                  "with are not the ones it holds (a field given twice?)")
        except CassetteError as exc:
            if self.error is None and not ahead:
                self.error = exc
            raise
        inter._real = real
        inter.checked = True
        if not self._releasable:
            del self._lines[number]  # held once: as text until decoded, then decoded

    # ------------------------------------------------------------------ letting go

    def allow_release(self) -> None:
        """Keep every line's text after decoding it, so that ``release`` can let a decoded
        rollout go and a later use decode it again. Called before anything is decoded."""
        with self._lock:
            self._releasable = True

    def release(self, rollout: str) -> None:
        """Let go of ``rollout``'s decoded recordings; its lines stay, as text, and a later
        use decodes them again (in order: a turn's body is a delta of the earlier ones).

        Why: a replay that has answered every recording of a rollout needs none of them
        again, and keeping every decoded body to the end made the survivors of a long
        replay grow by some 17 tracked containers a recording, so that the garbage
        collector's full passes — each walking all of them — came more often the longer
        the cassette. What a rollout in flight holds is let go when it ends."""
        with self._lock:
            group = self._by_rollout.get(rollout)
            if not self._releasable or not group or not all(i.checked for i in group):
                return
            for inter in group:
                inter._real = None
            self._done[rollout] = 0

    def check_all(self) -> CassetteError | None:
        """Decode every line not decoded yet; the first damaged one's error (or None)."""
        if self.error is not None:
            return self.error
        try:
            with paused_gc():  # as ``load_cassette``: many objects made, none freed
                for rollout, group in list(self._by_rollout.items()):
                    if rollout is None:  # scope-less lines are decoded one by one
                        for inter in group:
                            if not inter.checked:
                                inter.load()
                    elif group and not group[-1].checked:
                        group[-1].load()  # and, in order, every earlier line of its rollout
            for ident, defs in list(self._blobs.items()):
                for blob in defs:
                    if blob.value is NOT_FOUND:
                        with self._lock:
                            blob.value = self._decode_blob(ident, blob)
        except CassetteError as exc:
            self.error = self.error or exc
        return self.error


def read_deferred(path: str | Path, matcher_signature: str | Callable[[CassetteHeader], str]
                  ) -> DeferredReader | None:
    """A deferred reading of the cassette at ``path`` for a replay whose matcher has
    ``matcher_signature`` (or the signature that function gives for the file's header: the
    header's normalizers join the matcher), or None when it must be read whole (see the
    module docstring).
    A damaged line found at start raises ``CassetteError`` as ``load_cassette`` would."""
    path = Path(path)
    if path.is_dir() or path.name.endswith(".partial"):
        return None
    lines, _ = text_lines(path)
    with paused_gc():
        reader = DeferredReader(path, lines, matcher_signature)
    return reader if reader.cassette is not None else None
