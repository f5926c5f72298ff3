"""The recordings a replay session answers from, indexed, and the diagnosis of a miss.

Three views of the same recordings: by ``(rollout, seq)`` (the normal lookup: a rollout's
k-th request), by rollout (in seq order), and by ``(rollout, fingerprint)`` for concurrent
requests within a rollout and scope-less requests. All lookups are O(1), so replay time per
request does not grow with the cassette.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hermes_replay._cassette import Cassette, Interaction
from hermes_replay._cassette.fingerprints import EDIT_HINT, Edited
from hermes_replay._cassette.matching import Matcher, similarity, unified_request_diff
from hermes_replay._errors import Miss
from hermes_replay._secrets.redact import redact_text
from hermes_replay._session.traffic import TOOL_HTTP

__all__ = ["Recording", "RecordingIndex"]

Key = tuple[str | None, int]


@dataclass
class Recording:
    inter: Interaction
    fingerprint: str
    used: bool = False
    _lines: list[str] | None = None
    # the stored fingerprint, taken on trust at load: checked against the body at first use
    unchecked: bool = False
    edited: Edited | None = None  # set when that check found the body edited

    def lines(self, matcher: Matcher) -> list[str]:
        if self._lines is None:
            self._lines = matcher.render(self.inter.request)
        return self._lines


class RecordingIndex:
    def __init__(self) -> None:
        self.by_key: dict[Key, Recording] = {}
        self.by_rollout: dict[str | None, list[Recording]] = {}
        # unused recordings by (rollout, fingerprint), in seq order
        self._by_fp: dict[tuple[str | None, str], list[Recording]] = {}
        self._hosts: set[str] = set()
        self._matcher = Matcher()
        self._lines: dict[Key, int] = {}

    @classmethod
    def build(cls, cassette: Cassette, matcher: Matcher) -> RecordingIndex:
        index = cls()
        index._matcher, index._lines = matcher, cassette.lines
        # Fingerprints written by a matcher like this one are reused: recomputing them is most
        # of a large cassette's start-up time. Otherwise (other ignores/normalizers, older
        # format) they are computed afresh, so new matching rules apply to old cassettes.
        trusted = cassette.header.extra.get("matcher") == matcher.signature()
        for inter in cassette.interactions:
            fp = inter.fingerprint if trusted and inter.fingerprint else None
            rec = Recording(inter, fp or matcher.fingerprint(inter.request), unchecked=bool(fp))
            index.by_key[inter.key] = rec
            index.by_rollout.setdefault(inter.rollout, []).append(rec)
        for recs in index.by_rollout.values():
            recs.sort(key=lambda r: r.inter.seq)
            for rec in recs:
                index._by_fp.setdefault((rec.inter.rollout, rec.fingerprint), []).append(rec)
                index._hosts.add(urlsplit(rec.inter.request.get("url", "")).netloc.lower())
        return index

    def knows_host(self, netloc: str) -> bool:
        return netloc.lower() in self._hosts

    def unused(self) -> list[Key]:
        # a tool's own HTTP calls are made only when the tool executes; a replay that answers
        # the tool call from the cassette rightly leaves them unused
        return [key for key, rec in self.by_key.items()
                if not rec.used and rec.inter.kind != TOOL_HTTP]

    def find(self, rollout: str | None, turn: int, fp: str) -> Recording | None:
        """An unused recording for a request with fingerprint ``fp``, ``turn`` being the
        rollout's next unanswered turn."""
        if rollout is not None:
            rec = self.by_key.get((rollout, turn))
            if rec is not None and not rec.used and rec.fingerprint == fp \
                    and self._genuine(rec):
                return rec
        # concurrent requests within a rollout, and scope-less requests: the first unused
        # recording with this fingerprint (order of issue)
        candidates = self._by_fp.get((rollout, fp))
        while candidates:
            if candidates[0].used:
                candidates.pop(0)
            elif self._genuine(candidates[0]):
                return candidates[0]
            # else: re-filed under its body's own fingerprint; look again
        return None

    def _genuine(self, rec: Recording) -> bool:
        """True if ``rec``'s fingerprint is its body's. A trusted stored fingerprint is
        checked here, the first time it would answer a request: one whose body was edited
        is re-filed under the body's own fingerprint (so the edit is matched as it reads)
        and remembered for the miss report."""
        if not rec.unchecked:
            return True
        rec.unchecked = False
        actual = self._matcher.fingerprint(rec.inter.request)
        if actual == rec.fingerprint:
            return True
        rec.edited = Edited(rec.inter, self._lines.get(rec.inter.key), actual)
        old = self._by_fp.get((rec.inter.rollout, rec.fingerprint), [])
        old[:] = [r for r in old if r is not rec]
        rec.fingerprint = actual
        new = self._by_fp.setdefault((rec.inter.rollout, actual), [])
        new.append(rec)
        new.sort(key=lambda r: r.inter.seq)
        return False

    def diagnose(self, path: Path, rollout: str | None, turn: int, request: dict[str, Any],
                 matcher: Matcher) -> Miss:
        """Why ``request`` matched nothing, and its diff against the nearest recording."""
        recs = self.by_rollout.get(rollout, [])
        same_turn = self.by_key.get((rollout, turn)) if rollout is not None else None
        if same_turn is not None:
            self._genuine(same_turn)  # a miss on an edited recording says so
        if rollout is None:
            reason = (f"no unused scope-less recording has this fingerprint ({len(recs)} "
                      "scope-less request(s) recorded)")
        elif same_turn is not None and same_turn.edited is not None:
            reason = f"{same_turn.edited.describe(path)} — next step: {EDIT_HINT}"
        elif same_turn is not None:
            reason = "the request differs from the recording of this turn"
        elif recs:
            reason = f"rollout {rollout!r} has only {len(recs)} recorded turn(s)"
        else:
            names = [r for r in self.by_rollout if r is not None]
            shown = ", ".join(repr(n) for n in names[:5]) + (" …" if len(names) > 5 else "")
            reason = (f"the cassette has no rollout {rollout!r} "
                      f"({len(names)} rollout(s) recorded: {shown or 'none'})")
        lines = matcher.render(request)
        nearest = same_turn
        if nearest is None:
            pool = recs or [r for rs in self.by_rollout.values() for r in rs][:5000]
            if pool:
                nearest = max(pool, key=lambda r: similarity(r.lines(matcher), lines))
        diff = ""
        if nearest is not None:
            n = nearest.inter
            label = f"recorded (rollout {n.rollout or '-'}, turn {n.seq + 1})"
            diff = unified_request_diff(nearest.lines(matcher), lines, label, "request")
            # the recorded side is cassette content: scrubbed as every display of it is
            # (``_cassette.display``); the live side was redacted before it was matched
            diff = redact_text(diff)
        return Miss(str(path), rollout, turn, request["method"], urlsplit(request["url"]).path,
                    reason, nearest.inter.key if nearest is not None else None, diff)
