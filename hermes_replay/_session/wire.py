"""What a session does with one intercepted request: answer it, record it, or miss.

``Session`` holds the state (per-rollout cursors and issue counters, hits, new recordings,
misses) under one lock; this mixin is the request path through it, kept apart from the
session's lifecycle and from its results (``_session.results``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from hermes_replay._cassette import CassetteHeader, CassetteWriter, Interaction
from hermes_replay._cassette.deferred import DeferredReader
from hermes_replay._cassette.matching import Matcher
from hermes_replay._errors import CassetteError, Miss, RequestNotRecorded
from hermes_replay._secrets.redact import CleanBodies
from hermes_replay._session.convert import (
    BodyText,
    ExpectedRequest,
    header_fields_from,
    interaction_kind,
    is_failed_attempt,
    stored_request,
    stored_response,
    wire_response,
)
from hermes_replay._session.forking import ForkPoint
from hermes_replay._session.health import health_reply, is_health_ping
from hermes_replay._session.index import Recording, RecordingIndex
from hermes_replay._session.intercept import WireRequest, WireResponse
from hermes_replay._session.lanes import task_lane
from hermes_replay._session.live_calls import LiveCalls, reply_problem
from hermes_replay._session.liveness import Liveness, is_unanswered
from hermes_replay._session.refusals import Refusals
from hermes_replay._session.scope import current_rollout, current_stage
from hermes_replay._session.summary import ReplayEvent
from hermes_replay._session.traffic import TOOL_HTTP, is_recorded_endpoint

__all__ = ["WireHandling"]


@dataclass
class _Exchange:
    """One intercepted request (implements ``_intercept.Exchange``)."""

    session: WireHandling
    action: Literal["replay", "record", "passthrough"]
    rollout: str | None = None
    issue: int = 0
    request: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    response: WireResponse | None = None
    started: float = field(default_factory=time.perf_counter)
    done: bool = False
    stage: str = "agent"  # "reward": made inside ``scoring()`` (a judge)
    lane: int | None = None  # creation number of the task that sent it (see ``lanes``)

    heard: bool = False  # the endpoint's answer has begun (counted once in ``live``)
    #: set for a call sent live on replay (``--llm live=…``): what goes out instead of the
    #: request — to the endpoint the user named, with their key (``_session.live_calls``)
    outgoing: WireRequest | None = None
    #: seconds the live call may take (``LiveCalls.call_timeout``): the client's own timeouts
    #: are cut to it, so a silent endpoint fails the attempt even where no watchdog runs
    deadline: float | None = None

    def answering(self) -> None:
        """The answer's headers arrived: the endpoint is there, however long its body or stream
        takes (a long streamed reasoning reply must not trip the first-answer deadline)."""
        if self.action == "record" and not self.heard:
            self.heard = True
            self.session.live.answered()

    def finish(self, response: WireResponse) -> None:
        if self.done or self.action != "record":
            return
        self.done = True
        self.answering()
        if self.outgoing is not None:
            self.session._live_closed(self)
            self.session._live_answer(self, response)
            return
        # a 4xx is recorded (a 429 retried): either way, counted with the endpoint's reason
        self.session.refusals.note(response.status, self.request.get("method", ""),
                                   self.request.get("url", ""), response.content)
        if is_failed_attempt(response.status):
            self.session._failed(self, f"HTTP {response.status}")
        else:
            self.session._recorded(self, response)

    def fail(self, error: BaseException | None = None) -> None:
        if self.done or self.action != "record":
            return
        self.done = True
        why = type(error).__name__ if error else "incomplete stream"
        self.session._failed(self, why)
        if self.outgoing is not None:  # httpx ReadTimeout…, aiohttp/asyncio TimeoutError
            self.session._live_closed(self, timed_out="Timeout" in why)
            self.session._live_failed(self, f"{why} from {self.outgoing.url}")
        if is_unanswered(error):  # counted above first: this may stop the run (its guard)
            assert error is not None
            url = self.outgoing.url if self.outgoing is not None else self.request.get("url", "")
            self.session.live.unanswered(url, error)


class WireHandling:
    """The request path of ``Session`` (a mixin: the state is the session's)."""

    mode: str
    path: Path
    matcher: Matcher
    llm_paths: tuple[str, ...]
    passthrough_hosts: frozenset[str]
    keep_headers: frozenset[str]
    miss_events: int
    miss_watchers: list[Callable[[], None]]
    write_error: CassetteError | None
    _lock: threading.RLock
    _active: bool
    _header: CassetteHeader
    _index: RecordingIndex
    _issued: dict[str | None, int]
    _cursor: dict[str | None, int]
    _hits: list[tuple[str | None, int, Interaction]]
    _new: list[tuple[str | None, int, Interaction]]
    _lanes: dict[tuple[str | None, int], int | None]
    _answered: dict[str | None, int]
    _miss_index: dict[tuple[str | None, int, str], Miss]
    _root_misses: dict[str, Miss]
    _item_notes: dict[str, str]
    _followed: dict[str, list[tuple[int, dict[str, Any]]]]
    _reward_issued: dict[str, int]
    _failed_attempts: int
    refusals: Refusals
    _wants_memo: dict[tuple[str, str], bool]
    _deferred: DeferredReader | None
    _unanswered: dict[str, int]
    _clean_bodies: CleanBodies
    live: Liveness
    live_calls: LiveCalls | None
    _passthrough: int
    _trace_path: Path | None
    _trace: list[dict[str, Any]]
    _emit: Callable[[ReplayEvent], None]
    _journal: Callable[[Callable[[CassetteWriter], None]], None]
    fork: ForkPoint | None
    _fork_begins: Callable[[str], None]
    _fork_miss: Callable[[str | None, Miss], None]

    # not ``answered``: that name is ``Results.answered`` (the session's progress, which the
    # stall guard reads); a method of this class by that name shadowed it and killed the guard
    def answered_in(self, rollout: str) -> int | None:
        """How many of ``rollout``'s requests were answered (recorded, or replayed from the
        cassette) — failed attempts not counted; None when passing through (nothing counted)."""
        if self.mode == "passthrough":
            return None
        with self._lock:
            return self._answered.get(rollout, 0)

    def follow_answers(self, rollout: str) -> list[tuple[int, dict[str, Any]]]:
        """Keep ``rollout``'s agent answers from now on, as (seq, stored response), in the list
        returned (until :meth:`unfollow`): a plain env's scores are matched to the completions
        they came from by content, so the group needs its own replies (recorded or replayed)."""
        with self._lock:
            return self._followed.setdefault(rollout, [])

    def unfollow(self, rollout: str) -> None:
        with self._lock:
            self._followed.pop(rollout, None)

    def wants(self, method: str, url: str) -> bool:
        # asked for every request a client sends, almost always with the same few URLs: what
        # the session's own settings decide is remembered (parsing the URL again cost more
        # than a replayed request's lookup)
        known = self._wants_memo.get((method, url))
        if known is not None:
            return known
        decided = self._wants_by_settings(method, url)
        if decided is None:  # a tool's HTTP API declared as rollout traffic: the declarations
            return is_recorded_endpoint(url)  # may grow during the run, so never remembered
        if len(self._wants_memo) < 1024:  # bounded: URLs with ever new query strings
            self._wants_memo[(method, url)] = decided
        return decided

    def _wants_by_settings(self, method: str, url: str) -> bool | None:
        parts = urlsplit(url)
        if method.upper() == "GET" and self.mode == "replay":
            return self._is_health(parts.netloc, parts.path)
        if method.upper() != "POST":
            return False
        if (parts.hostname or "").lower() in self.passthrough_hosts:
            return False
        path = parts.path.rstrip("/")
        if any(path.endswith(suffix) for suffix in self.llm_paths):
            return True
        return None

    def _is_health(self, netloc: str, path: str) -> bool:
        """vLLM/SGLang servers poll ``GET /health`` and hold every request until it answers;
        in replay the endpoint may be gone, so hosts the cassette knows are answered here."""
        return path.rstrip("/").endswith("/health") and self._index.knows_host(netloc)

    def begin(self, wire: WireRequest) -> _Exchange:
        if wire.method.upper() == "GET":  # only health checks get here (see ``wants``)
            return _Exchange(self, "replay", response=WireResponse(
                200, [("content-type", "application/json")],
                body=b'{"status":"ok","served_by":"hermes-replay"}'))
        scope = current_rollout()
        rollout = scope.id if scope is not None else None
        stage = current_stage() if rollout is not None else "agent"
        if self.mode == "passthrough":
            with self._lock:
                self._passthrough += 1
            return _Exchange(self, "passthrough", rollout)
        if self.live_calls is not None and self.live_calls.selects(stage, wire):
            return self._go_live(rollout, stage, wire)
        fork = self.fork
        forked = fork is not None and fork.live(rollout, stage, self._cursor.get(rollout, 0))
        if forked:  # the fork's live part: its recordings (the parent's turns) are not used
            assert rollout is not None
            self._fork_begins(rollout)
        elif rollout is not None and stage == "agent" and self.mode in ("replay", "auto"):
            exact = self._exact_hit(rollout, wire)
            if exact is not None:
                return exact
        request = stored_request(wire, self.keep_headers, self._clean_bodies, rollout)
        fp = self.matcher.fingerprint(request)
        with self._lock:
            issue = self._issue(rollout)
            reward: int | None = None  # 0-based number of this reward call in its rollout
            if stage == "reward" and rollout is not None:
                reward = self._reward_issued.get(rollout, 0)
                self._reward_issued[rollout] = reward + 1
            if self.mode in ("replay", "auto") and not forked:
                rec = (self._find(rollout, fp) if reward is None or rollout is None
                       else self._index.find_reward(rollout, reward, fp))
                if rec is not None:
                    return self._hit(rec, rollout, issue, request, wire.method)
                if self.mode == "replay" and rollout is None and is_health_ping(request):
                    return _Exchange(self, "replay", rollout, issue, request, fp,
                                     response=health_reply(request))
                if self.mode == "replay" or fork is not None:  # a fork's prefix never goes live
                    self.miss_events += 1
                    known = len(self._miss_index)
                    miss = self._miss(rollout, request, fp, reward)
                    if fork is not None:
                        self._fork_miss(rollout, miss)
                    if len(self._miss_index) > known:  # one event per miss, as counted
                        self._emit(ReplayEvent("miss", rollout, miss.seq, wire.method,
                                               request["url"], None, detail=miss.reason))
                    self._traced(rollout, issue, request)
                    for watcher in self.miss_watchers:  # the miss is counted and kept: check
                        watcher()
                    # ends this request now: no retry layer (all catch Exception) sees it
                    raise RequestNotRecorded(miss)
        if self.write_error is not None:  # nothing more can be written: stop the run now
            raise self.write_error
        self.live.sent(request["url"])
        return _Exchange(self, "record", rollout, issue, request, fp, stage=stage,
                         lane=task_lane())

    def _go_live(self, rollout: str | None, stage: str, wire: WireRequest) -> _Exchange:
        """Send a selected call to the live endpoint (``--llm live=…``); its recording, if
        any, is left unused and replaced by the answer in the rescored cassette."""
        assert self.live_calls is not None
        request = stored_request(wire, self.keep_headers)
        fp = self.matcher.fingerprint(request)
        outgoing = self.live_calls.outgoing(wire, self.llm_paths)
        with self._lock:
            issue = self._issue(rollout)
            if stage == "reward" and rollout is not None:
                self._reward_issued[rollout] = self._reward_issued.get(rollout, 0) + 1
            else:  # an agent-stage judge (a plain env's): its recorded turn is the one skipped
                turn = self._cursor.get(rollout, 0)
                rec = self._index.by_key.get((rollout, turn))
                if rec is not None and not rec.used and rec.reward_call is None \
                        and self.live_calls.selects_recorded(rec.inter.request, rec.inter.stage):
                    rec.used = True
                    self._cursor[rollout] = turn + 1
        self.live_calls.began()
        self.live.sent(outgoing.url)
        ex = _Exchange(self, "record", rollout, issue, request, fp, stage=stage,
                       lane=task_lane(), outgoing=outgoing,
                       deadline=self.live_calls.call_timeout)
        self.live_calls.opened(ex, outgoing.url)  # bounded by its deadline from now on
        return ex

    def _live_answer(self, ex: _Exchange, wire: WireResponse) -> None:
        """A live call's answer: a 2xx is kept for the rescored cassette; anything else is a
        call with no answer (the env may have scored the rollout without its judge)."""
        assert self.live_calls is not None
        url = ex.outgoing.url if ex.outgoing else "?"
        if 200 <= wire.status < 300:
            problem = reply_problem(wire, url)
            if problem is None:
                self.live_calls.succeeded(ex.rollout, ex.fingerprint)
                self._recorded(ex, wire)
                return
            self._failed(ex, problem)
            self._live_failed(ex, problem)
        else:
            self._failed(ex, f"HTTP {wire.status}")
            self._live_failed(ex, f"HTTP {wire.status} from {url}")

    def _live_closed(self, ex: _Exchange, timed_out: bool = False) -> None:
        if self.live_calls is not None:
            self.live_calls.closed(ex, timed_out)

    def _live_failed(self, ex: _Exchange, why: str) -> None:
        if self.live_calls is not None:
            self.live_calls.failed(ex.rollout, ex.fingerprint, why)

    def _exact_hit(self, rollout: str, wire: WireRequest) -> _Exchange | None:
        """The common case, cheaply: the request is byte for byte this turn's recording."""
        turn = self._cursor.get(rollout, 0)
        rec = self._index.by_key.get((rollout, turn))
        # an agent request never takes a recorded reward call, even one byte for byte alike
        if rec is None or rec.used or rec.reward_call is not None:
            return None
        expected = rec.expected  # read once: a concurrent hit of this turn clears it
        if expected is None:
            self._prepare(rollout, rec)
            expected = rec.expected
        if expected is None or not expected.matches(wire):
            return None
        with self._lock:
            if rec.used or self._cursor.get(rollout, 0) != turn:
                return None  # a concurrent request of this rollout took it meanwhile
            issue = self._issue(rollout)
            return self._hit(rec, rollout, issue, rec.inter.request, wire.method)

    def _prepare(self, rollout: str, first: Recording) -> None:
        """Make the expected bytes and the answer of ``rollout``'s agent turns from ``first``
        on, in one batch when the rollout is first asked for.

        Why in one batch: a replay asks for a rollout's turns one after another, each between
        long runs of the SDK's and the env's own code, and the same work done a turn at a
        time ran at half the speed (the code and the blobs it shares fall out of the
        processor's caches in between). Memory stays linear: a turn's expected bytes are
        mostly the previous turn's objects (``BodyText``), and both are dropped when the turn
        is answered. A damaged line met ahead is left for the request that uses it."""
        with self._lock:
            text = BodyText()
            for rec in self._index.by_rollout.get(rollout, ()):
                if rec.used or rec.reward_call is not None or rec.inter.seq < first.inter.seq:
                    continue
                if rec.expected is not None:
                    return  # prepared already, from here on
                try:
                    request, response = rec.inter.request, rec.inter.response
                except CassetteError:
                    if rec is first:
                        raise
                    return
                rec.expected = ExpectedRequest(request, text)
                rec.answer = wire_response(response)

    def _issue(self, rollout: str | None) -> int:
        """The next order-of-issue number of ``rollout`` (caller holds the lock)."""
        issue = self._issued.get(rollout, 0)
        self._issued[rollout] = issue + 1
        return issue

    def _hit(self, rec: Recording, rollout: str | None, issue: int, request: dict[str, Any],
             method: str) -> _Exchange:
        """Use ``rec`` for this request (caller holds the lock)."""
        rec.used = True
        if rec.reward_call is None:  # the cursor and a rollout's turns count the agent's
            self._cursor[rollout] = self._cursor.get(rollout, 0) + 1
            self._answered[rollout] = self._answered.get(rollout, 0) + 1
        answer, rec.answer, rec.expected = rec.answer, None, None  # used once: let them go
        if answer is None:
            answer = wire_response(rec.inter.response)
        self._hits.append((rollout, issue, rec.inter))
        followed = self._followed.get(rollout) if rollout is not None else None
        if followed is not None and rec.reward_call is None:
            followed.append((rec.inter.seq, rec.inter.response))
        self._emit(ReplayEvent("hit", rollout, rec.inter.seq, method, request["url"],
                               answer.status))
        self._traced(rollout, issue, request)
        if rollout is not None and self._deferred is not None:
            left = self._unanswered.get(rollout)
            if left is None:  # a tool's own HTTP calls are not waited for (``unused``)
                left = sum(r.inter.kind != TOOL_HTTP
                           for r in self._index.by_rollout.get(rollout, ()))
            self._unanswered[rollout] = left - 1
            if left == 1:  # every recording of it answered: its decoded bodies can go
                self._deferred.release(rollout)
        return _Exchange(self, "replay", rollout, issue, request, rec.fingerprint,
                         response=answer)

    def _traced(self, rollout: str | None, issue: int, request: dict[str, Any]) -> None:
        if self._trace_path is not None:  # canonical: as matching sees it (ignores, normalizers)
            self._trace.append({"kind": "request", "rollout": rollout, "seq": issue,
                                "turn": issue, "request": self.matcher.canonical(request)})

    def _find(self, rollout: str | None, fp: str) -> Recording | None:
        return self._index.find(rollout, self._cursor.get(rollout, 0), fp)

    def _miss(self, rollout: str | None, request: dict[str, Any], fp: str,
              reward: int | None = None) -> Miss:
        turn = self._cursor.get(rollout, 0)
        # a reward call's key never collides with an agent turn's (negative numbers)
        key = (rollout, turn if reward is None else -1 - reward, fp)
        if key not in self._miss_index:  # else: a retry of a request that already missed
            root = self._root_misses.get(rollout) if rollout is not None else None
            miss = self._index.diagnose(self.path, rollout, turn, request, self.matcher,
                                        reward_call=reward,
                                        cause=root.where if root is not None else None)
            note = self._item_notes.get(rollout) if rollout is not None else None
            if note:  # a plain env's item changed: say which fields, not only "no rollout"
                miss = replace(miss, reason=note if miss.reason.startswith(
                    "the cassette has no rollout") else f"{miss.reason}; {note}")
            if rollout is not None and root is None and reward is None:
                self._root_misses[rollout] = miss  # what later misses of it follow from
            self._miss_index[key] = miss
        return self._miss_index[key]

    def _recorded(self, ex: _Exchange, wire: WireResponse) -> None:
        response = stored_response(wire, self.keep_headers)
        path = urlsplit(ex.request["url"]).path
        kind = TOOL_HTTP if is_recorded_endpoint(ex.request["url"]) else interaction_kind(path)
        inter = Interaction(rollout=ex.rollout, seq=ex.issue, kind=kind,
                            request=ex.request, response=response, fingerprint=ex.fingerprint,
                            duration_ms=(time.perf_counter() - ex.started) * 1000,
                            stage="reward" if ex.stage == "reward" else None)
        with self._lock:
            if not self._active:  # a late response after the block ended: not written
                self._emit(ReplayEvent("failed", ex.rollout, None, ex.request["method"],
                                       ex.request["url"], wire.status, detail="after close"))
                return
            if not self._new and not self._hits and self.mode != "replay":
                self._derive_header(inter)
            self._new.append((ex.rollout, ex.issue, inter))
            self._lanes[(ex.rollout, ex.issue)] = ex.lane
            if ex.stage != "reward":  # a judge's request is not one of the rollout's turns
                self._answered[ex.rollout] = self._answered.get(ex.rollout, 0) + 1
                followed = self._followed.get(ex.rollout) if ex.rollout is not None else None
                if followed is not None:
                    followed.append((inter.seq, response))
            self._journal(lambda w: w.interaction(inter))
        self._emit(ReplayEvent("record", ex.rollout, ex.issue, ex.request["method"],
                               ex.request["url"], wire.status))

    def _failed(self, ex: _Exchange, why: str) -> None:
        with self._lock:
            self._failed_attempts += 1
        self._emit(ReplayEvent("failed", ex.rollout, None, ex.request.get("method", ""),
                               ex.request.get("url", ""), None, detail=why))

    def _derive_header(self, inter: Interaction) -> None:
        """Fill header fields the caller did not give from the first recorded request."""
        current = self._header.model_dump()
        derived = header_fields_from(inter, self.llm_paths)
        self._header = self._header.merged(
            {k: v for k, v in derived.items() if v and not current.get(k)})
