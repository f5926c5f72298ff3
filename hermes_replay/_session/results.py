"""A session's results: what it answered, missed and left unused, its summary, and what a
clean close writes (``Session`` mixin; the state is the session's)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from hermes_replay._cassette import CassetteHeader, Interaction
from hermes_replay._cassette.matching import Matcher
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._errors import Miss
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import redact_fields, redact_json
from hermes_replay._session.index import RecordingIndex
from hermes_replay._session.lanes import in_creation_order
from hermes_replay._session.summary import OutcomeComparison, ReplaySummary
from hermes_replay._session.tools import ToolLedger
from hermes_replay._session.workers import owner

__all__ = ["Results"]


class Results:
    """Counts, verdict inputs and final contents of ``Session``."""

    mode: str
    path: Path
    matcher: Matcher
    worker: str | None
    drop_unrun: bool
    tools: ToolLedger
    _lock: threading.RLock
    _header: CassetteHeader
    _index: RecordingIndex
    _hits: list[tuple[str | None, int, Interaction]]
    _new: list[tuple[str | None, int, Interaction]]
    _lanes: dict[tuple[str | None, int], int | None]
    _new_outcomes: dict[str, dict[str, Any]]
    _recorded_outcomes: dict[str, dict[str, Any]]
    _item_notes: dict[str, str]
    _miss_index: dict[tuple[str | None, int, str], Miss]
    _failed_attempts: int
    _passthrough: int
    _known_generation: int
    _trace: list[dict[str, Any]]
    #: auto, once written: what the new file holds (see ``_accounting``)
    _written: dict[str, Any] | None = None

    def _write_trace(self, path: Path) -> None:
        """What this run sent, one JSON line per request, tool call and reward (already
        redacted), for ``replay --twice`` to compare with another run."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(e, ensure_ascii=False, default=str) + "\n"
                          for e in self._trace)


    def _unused(self) -> tuple[list[tuple[str | None, int]], int]:
        """Recordings never requested that were this worker's to request, and how many
        belong to other workers (caller holds the lock)."""
        keys = self._index.unused()
        live = getattr(self, "live_calls", None)
        if live is not None:  # sent live instead: replaced, not left unused
            keys = [k for k in keys if not live.selects_recorded(
                self._index.by_key[k].inter.request, self._index.by_key[k].inter.stage)]
        mine = self._mine(keys)
        return mine, len(keys) - len(mine)

    def _mine(self, keys: list[tuple[str | None, int]]) -> list[tuple[str | None, int]]:
        """The ``(rollout, seq)`` keys of this worker (all of them when it has no identity)."""
        if self.worker is None:
            return keys
        return [k for k in keys if k[0] is None or owner(k[0]) == self.worker]

    def _final_contents(self, union: bool | None = None
                        ) -> tuple[list[Interaction], dict[str, dict[str, Any]], list[ToolCall]]:
        """What a clean close writes: this run's interactions (record), or the union (auto;
        ``union=True``: a replay's rescored cassette, where every rollout that ran is this
        run's — its recorded calls as used and its live answers — and the rest as recorded)."""
        rescored = bool(union) and self.mode == "replay"
        union = self.mode == "auto" if union is None else union
        touched = {r for r, _, _ in self._new if r is not None}
        if rescored:
            touched |= {r for r, _, _ in self._hits if r is not None} | set(self._new_outcomes)
        out: list[Interaction] = []
        outcomes: dict[str, dict[str, Any]] = {}
        if self.mode == "auto" and self.drop_unrun:
            # a rollout of the old file this run never made is stale: gone, as in ``record``
            touched |= set(self.summary().never_ran)
        if union:
            # untouched rollouts keep every old recording and outcome; scope-less recordings
            # are matched by fingerprint, so all old ones stay and new ones are appended
            for rollout, recs in self._index.by_rollout.items():
                if rollout is None or rollout not in touched:
                    # stored with this session's fingerprints, as the header now promises
                    out.extend(r.inter.model_copy(update={"fingerprint": r.fingerprint})
                               for r in recs)
            outcomes = {k: v for k, v in self._recorded_outcomes.items() if k not in touched}
        entries: dict[str | None, list[tuple[int, Interaction]]] = {}
        for rollout, issue, inter in self._new:
            entries.setdefault(rollout, []).append((issue, inter))
        for rollout, issue, inter in self._hits:
            if rollout is not None and rollout in touched:
                rec = self._index.by_key.get(inter.key) if rescored else None
                if rec is not None:  # stored with this session's fingerprint (the header's)
                    inter = inter.model_copy(update={"fingerprint": rec.fingerprint})
                entries.setdefault(rollout, []).append((issue, inter))
        for rollout, items in entries.items():
            items.sort(key=lambda item: item[0])
            base = 0
            if rollout is None:
                base = 1 + max((i.seq for i in out if i.rollout is None), default=-1)
            # identical concurrent requests: answers filed in their tasks' creation order
            ordered = in_creation_order([(inter.fingerprint, self._lanes.get((rollout, issue)),
                                          inter) for issue, inter in items])
            for rank, inter in enumerate(ordered):
                out.append(inter.model_copy(update={"seq": base + rank}))
        outcomes.update(self._new_outcomes)
        if self.mode == "auto":
            self._written = _accounting(self._index, out, len(self._new))
        touched |= {c.rollout for c in self.tools.new if c.rollout is not None}
        return out, outcomes, self.tools.final(touched, union=union)

    def _rescrubbed(self, interactions: list[Interaction], outcomes: dict[str, dict[str, Any]],
                    tool_calls: list[Any]) -> tuple[list[Interaction], dict[str, dict[str, Any]],
                                                    list[Any]]:
        """Scrub again what was stored before a secret became known (a key first seen in a
        late response may have been echoed in an earlier turn); refingerprint what changed."""
        if KNOWN.generation == self._known_generation:
            return interactions, outcomes, tool_calls
        out: list[Interaction] = []
        for inter in interactions:
            request, response = redact_json(inter.request), redact_json(inter.response)
            if request != inter.request or response != inter.response:
                inter = inter.model_copy(update={
                    "request": request, "response": response,
                    "fingerprint": self.matcher.fingerprint(request)})
            out.append(inter)
        fields = redact_fields(self._header.model_dump())
        self._header = self._header.merged(
            {k: v for k, v in fields.items() if k not in ("type", "schema_version")})
        calls = []
        for call in tool_calls:
            data = call.model_dump()
            cleaned = redact_json(data)
            calls.append(call if cleaned == data else type(call).model_validate(cleaned))
        return out, {k: redact_json(v) for k, v in outcomes.items()}, calls

    @property
    def header(self) -> CassetteHeader:
        return self._header

    @property
    def answered(self) -> int:
        """Requests answered from the cassette or recorded so far (progress, for watchdogs)."""
        return len(self._hits) + len(self._new)

    @property
    def misses(self) -> list[Miss]:
        with self._lock:
            return list(self._miss_index.values()) + list(self.tools.misses)

    @property
    def unused(self) -> list[tuple[str | None, int]]:
        with self._lock:
            return self._unused()[0]

    @property
    def outcomes(self) -> dict[str, OutcomeComparison]:
        """Per rollout: the recorded outcome next to the one reported in this run."""
        with self._lock:
            ids = list(self._new_outcomes) + [
                r for r in self._recorded_outcomes if r not in self._new_outcomes]
            return {r: OutcomeComparison(r, self._recorded_outcomes.get(r),
                                         self._new_outcomes.get(r)) for r in ids}

    def recorded_groups(self) -> dict[str, dict[str, Any]]:
        """The plain-env groups the cassette held when the session started (``kind: group``
        outcomes, by id): what ``_runner.plain_resolve`` matches a replayed item against."""
        with self._lock:
            return {rid: dict(o) for rid, o in self._recorded_outcomes.items()
                    if o.get("kind") == "group"}

    def note_item(self, rollout: str, note: str) -> None:
        """Have every miss of ``rollout`` say ``note`` (what changed in its plain-env item)."""
        with self._lock:
            self._item_notes[rollout] = note

    @property
    def recorded_rollouts(self) -> list[str]:
        """The rollout ids the cassette held when the session started (replay and auto)."""
        ids = [r for r in self._index.by_rollout if r is not None]
        return ids + [r for r in self._recorded_outcomes if r not in self._index.by_rollout]

    def summary(self) -> ReplaySummary:
        with self._lock:
            rollouts_hit = {r for r, _, _ in [*self._hits, *self._new] if r is not None}
            inside = sum(1 for r, _, _ in [*self._hits, *self._new] if r is not None)
            unused, others = self._unused() if self.mode in ("replay", "auto") else ([], 0)
            # a rollout ran if it asked for anything (hit or miss) or reported an outcome
            ran = rollouts_hit | {m.rollout for m in self._miss_index.values()} | set(
                self._new_outcomes)
            recorded = self.recorded_rollouts if self.mode in ("replay", "auto") else []
            if self.worker is not None:  # a worker of a deployment runs its own rollouts
                recorded = [r for r in recorded if owner(r) == self.worker]
            return ReplaySummary(
                mode=self.mode, cassette=str(self.path), rollouts=len(rollouts_hit),
                interactions=len(self._hits) + len(self._new), turns=inside,
                misses=list(self._miss_index.values()) + list(self.tools.misses),
                unused=unused, other_workers=others, worker=self.worker,
                recorded=len(self._new), failed_attempts=self._failed_attempts,
                passthrough=self._passthrough,
                outcomes=list(self.outcomes.values()),
                recorded_rollouts=len(recorded),
                never_ran=[r for r in recorded if r not in ran],
                rerecorded=self._rerecorded() if self.mode == "auto" else {},
                written=dict(self._written) if self._written is not None else None,
                tools_replayed=self.tools.replayed,
                tools_executed=self.tools.executed,
                tools_errored=self.tools.errored,
                tool_drift=list(self.tools.drift),
                unused_tools=self._mine(self.tools.unused)
                if self.mode in ("replay", "auto") else [],
                rescored={r: list(v) for r, v in self.tools.worlds.rescored().items()},
                rebuilt={r: b.reason for r, b in self.tools.rebuilds.items() if b.done},
            )

    def _rerecorded(self) -> dict[str, int]:
        """auto: turns recorded anew per rollout (lock held)."""
        out: dict[str, int] = {}
        for rollout, _, _ in self._new:
            key = rollout if rollout is not None else "<no rollout>"
            out[key] = out.get(key, 0) + 1
        return out


def _accounting(index: RecordingIndex, written: list[Interaction], new: int) -> dict[str, Any]:
    """What an ``auto`` run wrote, counted from the file's own contents: ``holds`` interactions,
    ``rerecorded`` (new) + ``kept`` (old ones, as they were) = ``holds``; ``dropped``: old
    recordings the new file no longer has — those of ``dropped_rollouts`` (the run never made
    them) and the rest (turns of re-recorded rollouts the run did not request)."""
    present = {i.rollout for i in written}
    gone = sorted(r for r in index.by_rollout if r is not None and r not in present)
    kept = len(written) - new
    dropped = len(index.by_key) - kept
    in_gone = sum(len(index.by_rollout[r]) for r in gone)
    return {"holds": len(written), "rerecorded": new, "kept": kept, "dropped": dropped,
            "dropped_rollouts": gone, "dropped_in_rollouts": in_gone,
            "rollouts": len({r for r in present if r is not None})}
