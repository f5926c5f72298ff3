"""The recordings a replay session answers from, indexed, and the diagnosis of a miss.

Three views of the same recordings: by ``(rollout, seq)`` (the normal lookup: a rollout's
k-th request), by rollout (in seq order), and by ``(rollout, fingerprint)`` for concurrent
requests within a rollout and scope-less requests. All lookups are O(1), so replay time per
request does not grow with the cassette.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hermes_replay._cassette import Cassette, Interaction
from hermes_replay._cassette.fingerprints import EDIT_HINT, Edited
from hermes_replay._cassette.matching import Matcher, field_changes, field_report, similarity
from hermes_replay._cassette.model import reward_calls, stages_marked
from hermes_replay._errors import Miss
from hermes_replay._secrets.redact import redact_text
from hermes_replay._session.convert import ExpectedRequest
from hermes_replay._session.intercept import WireResponse
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
    reward_call: int | None = None  # K of "reward call K" (see ``reward_calls``)
    # made ahead of the turn by the replay's fast path (``wire``), dropped when it is used:
    # the bytes a live request must be to be this turn, and what answers it
    expected: ExpectedRequest | None = None
    answer: WireResponse | None = None

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
        #: each rollout's reward calls, in order (``reward[r][K - 1]`` is reward call K)
        self.reward: dict[str, list[Recording]] = {}
        #: makes the decoder of the cassette's tokenizer, asked at the first token-path miss
        self.decoder: Callable[[], Callable[[list[int]], str] | None] | None = None
        self._decode: Callable[[list[int]], str] | None = None

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
        marked = stages_marked(cassette.interactions, cassette.header)
        for rollout, recs in index.by_rollout.items():
            recs.sort(key=lambda r: r.inter.seq)
            record = cassette.rollouts.get(rollout) if rollout is not None else None
            if record is None:
                continue
            numbers = reward_calls([r.inter for r in recs], record.outcome, marked)
            for rec in recs:
                if rec.inter.seq in numbers:
                    rec.reward_call = numbers[rec.inter.seq]
                    if rec.inter.stage is None:  # inferred: kept as marked when rewritten
                        rec.inter = rec.inter.model_copy(update={"stage": "reward"})
                    index.reward.setdefault(rollout, []).append(rec)
        for recs in index.by_rollout.values():
            for rec in recs:
                index._by_fp.setdefault((rec.inter.rollout, rec.fingerprint), []).append(rec)
                index._hosts.add(urlsplit(rec.inter.url).netloc.lower())
        return index

    def knows_host(self, netloc: str) -> bool:
        return netloc.lower() in self._hosts

    def unused(self) -> list[Key]:
        # a tool's own HTTP calls are made only when the tool executes; a replay that answers
        # the tool call from the cassette rightly leaves them unused
        return [key for key, rec in self.by_key.items()
                if not rec.used and rec.inter.kind != TOOL_HTTP]

    def find_reward(self, rollout: str, call: int, fp: str) -> Recording | None:
        """An unused recorded reward call of ``rollout`` with fingerprint ``fp``: the
        ``call``-th (0-based) first, then any other (judges called concurrently)."""
        recs = self.reward.get(rollout, [])
        if call < len(recs) and not recs[call].used and recs[call].fingerprint == fp \
                and self._genuine(recs[call]):
            return recs[call]
        return next((r for r in recs if not r.used and r.fingerprint == fp and self._genuine(r)),
                    None)

    def find(self, rollout: str | None, turn: int, fp: str) -> Recording | None:
        """An unused recording for a request with fingerprint ``fp``, ``turn`` being the
        rollout's next unanswered turn."""
        if rollout is not None:
            rec = self.by_key.get((rollout, turn))
            if rec is not None and not rec.used and rec.reward_call is None \
                    and rec.fingerprint == fp and self._genuine(rec):
                return rec
        # concurrent requests within a rollout, and scope-less requests: the first unused
        # recording with this fingerprint (order of issue)
        candidates = self._by_fp.get((rollout, fp))
        while candidates:
            if not candidates[0].used:
                break
            candidates.pop(0)
        # the agent's requests never take a recorded reward call (nor the reverse, above); a
        # recording whose stored fingerprint is not its body's is re-filed and skipped
        for c in list(candidates or ()):
            if not c.used and c.reward_call is None and self._genuine(c):
                return c
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
                 matcher: Matcher, *, reward_call: int | None = None,
                 cause: str | None = None) -> Miss:
        """Why ``request`` matched nothing, and its diff against the nearest recording.

        ``reward_call`` (0-based): the request is the rollout's reward call of that number,
        compared with its recorded reward calls only — never with the agent's turns."""
        recs = self.by_rollout.get(rollout, [])
        lines = matcher.render(request)
        if reward_call is not None and rollout is not None:
            rewards = self.reward.get(rollout, [])
            nearest = rewards[reward_call] if reward_call < len(rewards) else None
            if nearest is not None:
                self._genuine(nearest)  # a miss on an edited recording says so
            if nearest is not None and nearest.edited is not None:
                reason = f"{nearest.edited.describe(path)} — next step: {EDIT_HINT}"
            elif nearest is not None:
                reason = "the request differs from the recorded reward call of this number"
            elif rewards:
                reason = (f"rollout {rollout!r} has only {len(rewards)} recorded reward "
                          "call(s)")
                nearest = max(rewards, key=lambda r: similarity(r.lines(matcher), lines))
            else:
                reason = f"rollout {rollout!r} made no reward call when it was recorded"
            seq = nearest.inter.seq if nearest is not None else turn
            return self._miss(path, rollout, seq, request, matcher, lines, reason, nearest,
                              reward_call=reward_call + 1, cause=cause)
        same_turn = self.by_key.get((rollout, turn)) if rollout is not None else None
        if same_turn is not None:
            self._genuine(same_turn)  # a miss on an edited recording says so
        if same_turn is not None and same_turn.reward_call is not None:
            same_turn = None  # the agent's turn is not compared with a judge's call
        agent = [r for r in recs if r.reward_call is None]
        if rollout is None:
            reason = (f"no unused scope-less recording has this fingerprint ({len(recs)} "
                      "scope-less request(s) recorded)")
        elif same_turn is not None and same_turn.edited is not None:
            reason = f"{same_turn.edited.describe(path)} — next step: {EDIT_HINT}"
        elif same_turn is not None:
            reason = "the request differs from the recording of this turn"
        elif agent:
            reason = f"rollout {rollout!r} has only {len(agent)} recorded turn(s)"
        elif recs:  # never "no rollout R" while naming R
            reason = (f"rollout {rollout!r} has no recorded agent turn (its {len(recs)} "
                      "recorded request(s) are reward calls)")
        else:
            names = [r for r in self.by_rollout if r is not None]
            shown = ", ".join(repr(n) for n in names[:5]) + (" …" if len(names) > 5 else "")
            reason = (f"the cassette has no rollout {rollout!r} "
                      f"({len(names)} rollout(s) recorded: {shown or 'none'})")
        nearest = same_turn
        if nearest is None:
            pool = agent or [r for rs in self.by_rollout.values() for r in rs
                             if r.reward_call is None][:5000]
            if pool:
                nearest = max(pool, key=lambda r: similarity(r.lines(matcher), lines))
        return self._miss(path, rollout, turn, request, matcher, lines, reason, nearest,
                          cause=cause)

    def _miss(self, path: Path, rollout: str | None, seq: int, request: dict[str, Any],
              matcher: Matcher, lines: list[str], reason: str, nearest: Recording | None, *,
              reward_call: int | None = None, cause: str | None = None) -> Miss:
        diff = short = ""
        normalizer = None
        if nearest is not None:
            n = nearest.inter
            label = (f"recorded (reward call {nearest.reward_call} of rollout {n.rollout}, "
                     f"request {n.seq + 1})" if nearest.reward_call is not None else
                     f"recorded (rollout {n.rollout or '-'}, turn {n.seq + 1})")
            changes = field_changes(nearest.lines(matcher), lines)
            head = [f"--- {label}", "+++ request", *self._text_of_tokens(n.request, request)]
            # the recorded side is cassette content: scrubbed as every display of it is
            # (``_cassette.display``); the live side was redacted before it was matched
            diff = redact_text("\n".join([*head, *field_report(changes, verbose=True)]))
            short = redact_text("\n".join([*head, *field_report(changes)]))
            normalizer = fixing_normalizer(matcher, n.request, request)
        return Miss(str(path), rollout, seq, request["method"], urlsplit(request["url"]).path,
                    reason, nearest.inter.key if nearest is not None else None, diff, short,
                    reward_call=reward_call,
                    nearest_reward_call=nearest.reward_call if nearest is not None else None,
                    cause=cause, normalizer=normalizer)


    def _text_of_tokens(self, recorded: dict[str, Any], request: dict[str, Any]) -> list[str]:
        """A token-path miss's decoded text diff (``_session.token_misses``), or []."""
        from hermes_replay._session.token_misses import prompt_ids, text_diff_lines

        if prompt_ids(request) is None or prompt_ids(recorded) is None:
            return []
        if self._decode is None and self.decoder is not None:
            self._decode, self.decoder = self.decoder(), None  # made once, at the first one
        return text_diff_lines(recorded, request, self._decode)


def fixing_normalizer(matcher: Matcher, recorded: dict[str, Any],
                      request: dict[str, Any]) -> str | None:
    """The built-in normalizer(s) with which ``request`` matches ``recorded`` (``"datetime"``,
    ``"datetime + uuid"``), or None: what a miss's next step proposes to keep."""
    from dataclasses import replace

    from hermes_replay._cassette.normalizers import BUILTINS

    active = {p for p, _ in matcher.normalizers}
    todo = [b for b in BUILTINS.values() if not {p for p, _ in b.rewrites} <= active]
    for chosen in [[b] for b in todo] + ([todo] if len(todo) > 1 else []):
        extra = tuple(pair for b in chosen for pair in b.rewrites)
        trial = replace(matcher, normalizers=extra + tuple(matcher.normalizers))
        if trial.fingerprint(recorded) == trial.fingerprint(request):
            if len(chosen) > 1:  # all of them: name only those that change something
                chosen = [b for b in chosen if replace(matcher, normalizers=b.rewrites)
                          .canonical(request) != matcher.canonical(request)] or chosen
            return " + ".join(b.name for b in chosen)
    return None
