"""The cassette session: record policy, replay lookup, misses, outcomes.

Keyed by rollout identity: an LLM request made inside ``rollout(id)`` is the k-th request
of that rollout (``seq``), counted in order of issue; replay looks up ``(id, k)`` and checks
the fingerprint. Failed attempts while recording (exceptions, 5xx, 408/409/429) are not
written and take no number, so SDK and tenacity retries never shift a replay. Requests
outside any rollout fall back to fingerprint + order of issue.

Store (``_cassette``), matcher (``_matching``) and this policy are separate on purpose.
This module is over 400 lines because its state (per-rollout cursors and issue counters,
hits, new recordings, misses) is shared by every step of a request under one lock; the index
and miss diagnosis (``_index``) and the record shapes (``_convert``) already live apart.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from hermes_replay._cassette import (
    Cassette,
    CassetteHeader,
    CassetteWriter,
    Interaction,
    partial_path,
    paused_gc,
)
from hermes_replay._convert import (
    header_fields_from,
    interaction_kind,
    is_failed_attempt,
    same_request,
    stored_request,
    stored_response,
    wire_response,
)
from hermes_replay._errors import (
    CassetteError,
    CassetteMiss,
    Miss,
    RequestNotRecorded,
    UnusedRecordings,
)
from hermes_replay._health import health_reply, is_health_ping
from hermes_replay._index import Recording, RecordingIndex
from hermes_replay._intercept import WireRequest, WireResponse
from hermes_replay._known_secrets import KNOWN
from hermes_replay._load import load_cassette
from hermes_replay._matching import Matcher
from hermes_replay._redact import KEPT_HEADERS, redact_fields, redact_json
from hermes_replay._scope import RolloutScope, current_rollout
from hermes_replay._summary import OutcomeComparison, ReplayEvent, ReplaySummary
from hermes_replay._tokenizer_store import TokenizerMismatch, mismatch, stored_dir, with_store
from hermes_replay._toolcalls import ToolCall
from hermes_replay._tools import ToolCallsDrifted, ToolLedger
from hermes_replay._traffic import TOOL_HTTP, is_recorded_endpoint
from hermes_replay._workers import check_name, owner

__all__ = ["DEFAULT_LLM_PATHS", "MODES", "Observer", "Session", "cassette"]

Mode = Literal["replay", "record", "passthrough", "auto"]
MODES: tuple[str, ...] = ("replay", "record", "passthrough", "auto")
DEFAULT_LLM_PATHS: tuple[str, ...] = ("/chat/completions", "/completions", "/generate",
                                      "/responses")


class Observer(Protocol):
    """Hears what the environment reports to a session (``Session.observe``)."""

    def rollout_finished(self, scope: RolloutScope) -> None: ...

    def annotate(self, fields: dict[str, Any]) -> None: ...


def cassette(path: str | Path, mode: Mode = "replay", **options: Any) -> Session:
    """Record or replay the LLM traffic inside the block: ``with cassette("c.jsonl"):``.

    ``mode`` is ``"replay"`` (default), ``"record"``, ``"auto"`` or ``"passthrough"``; the
    options and what each mode does are documented on :class:`Session`.
    """
    return Session(path, mode, **options)


@dataclass
class _Exchange:
    """One intercepted request (implements ``_intercept.Exchange``)."""

    session: Session
    action: Literal["replay", "record", "passthrough"]
    rollout: str | None = None
    issue: int = 0
    request: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    response: WireResponse | None = None
    started: float = field(default_factory=time.perf_counter)
    done: bool = False

    def finish(self, response: WireResponse) -> None:
        if self.done or self.action != "record":
            return
        self.done = True
        if is_failed_attempt(response.status):
            self.session._failed(self, f"HTTP {response.status}")
        else:
            self.session._recorded(self, response)

    def fail(self, error: BaseException | None = None) -> None:
        if self.done or self.action != "record":
            return
        self.done = True
        self.session._failed(self, type(error).__name__ if error else "incomplete stream")


class Session:
    """Record or replay all LLM traffic (httpx, httpx2/openai, aiohttp) inside the block.

    Made by ``hermes_replay.cassette(path, mode, **options)``; used as ``with`` or
    ``async with``. It is bound to the context that enters it: requests, rollout reports and
    annotations from other threads or tasks with a cassette of their own never reach it.

    Modes:

    - ``"replay"``: LLM requests are answered from the cassette and never reach the network;
      a request with no recording ends at once with ``RequestNotRecorded`` (no retry layer
      sees it), and the block raises ``CassetteMiss`` listing every miss when it exits.
    - ``"record"``: requests go live and are written; the file replaces ``path`` only when
      the block exits cleanly (until then it is ``<path>.partial``).
    - ``"auto"``: replay what is recorded, record what is missing, write the union; the old
      file stays until the block exits cleanly, and ``summary().rerecorded`` says what was
      recorded anew (turns per rollout).
    - ``"passthrough"``: everything goes live and nothing is written.

    Options: ``header`` (fields for the cassette header: env_name, env_file, command …);
    ``strict`` (replay fails on recordings never used); ``ignore_paths`` (e.g.
    ``"body.metadata"``, ``"body.messages[*].name"``) and ``normalizers`` (``(regex, repl)``
    applied to body strings) for matching; ``default_ignores=False`` to match on
    ``user``/``metadata``/``stream_options`` too; ``llm_paths`` (POST path suffixes that
    are LLM traffic; everything else passes through untouched and is never written);
    ``passthrough_hosts`` (hosts never intercepted); ``keep_headers`` (header names stored
    as they are; every other header is dropped or redacted); ``on_event`` (progress callback);
    ``worker`` (this worker's identity, also set by ``annotate(worker=…)``: recordings of other
    workers are then not reported unused) and ``shard_by_worker`` (record: the file is renamed
    to ``<worker>.jsonl`` in its folder once the identity is known; see ``_workers``).

    Tool calls (made through ``hermes_replay.tool_call``) are recorded with their rollout; on
    replay ``tools="replay"`` (default) answers them from the cassette and executes nothing,
    ``tools="execute"`` runs them again and reports results that drifted (a failure only when
    ``strict``); ``tool_overrides={"name": "execute"}`` sets the policy of single tools.

    ``drop_unrun=True`` (auto): recorded rollouts this run never made are left out of the new
    file — for a full re-run of the recorded command (``record --missing-only``), where a
    rollout that no longer happens (its item changed) is stale, as ``record`` would drop it.
    """

    def __init__(
        self,
        path: str | Path,
        mode: Mode = "replay",
        *,
        header: dict[str, Any] | None = None,
        strict: bool = False,
        ignore_paths: Iterable[str] = (),
        normalizers: Iterable[tuple[Any, str]] = (),
        default_ignores: bool = True,
        llm_paths: Iterable[str] = DEFAULT_LLM_PATHS,
        passthrough_hosts: Iterable[str] = (),
        keep_headers: Iterable[str] = KEPT_HEADERS,
        on_event: Callable[[ReplayEvent], None] | None = None,
        tools: str = "replay",
        tool_overrides: Mapping[str, str] | None = None,
        trace: str | Path | None = None,
        drop_unrun: bool = False,
        worker: str | None = None,
        shard_by_worker: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown cassette mode {mode!r}; choose one of {', '.join(MODES)}")
        self.path = Path(path)
        self.mode: Mode = mode
        self.strict = strict
        self.matcher = Matcher.build(ignore_paths, normalizers, default_ignores=default_ignores)
        self.llm_paths = tuple(p.rstrip("/") for p in llm_paths)
        self.passthrough_hosts = frozenset(h.lower() for h in passthrough_hosts)
        self.keep_headers = frozenset(h.lower() for h in keep_headers)
        self.on_event = on_event
        self.drop_unrun = drop_unrun
        self._header_fields = redact_fields(dict(header or {}))
        self._lock = threading.RLock()
        self._active = False
        self._writer: CassetteWriter | None = None
        self._header = CassetteHeader()
        self._index = RecordingIndex()
        self._recorded_outcomes: dict[str, dict[str, Any]] = {}
        self._issued: dict[str | None, int] = {}
        self._cursor: dict[str | None, int] = {}
        self._hits: list[tuple[str | None, int, Interaction]] = []
        self._new: list[tuple[str | None, int, Interaction]] = []
        self._new_outcomes: dict[str, dict[str, Any]] = {}
        self._miss_index: dict[tuple[str | None, int, str], Miss] = {}
        self._failed_attempts = 0
        self._passthrough = 0
        self._tokenizer_error: TokenizerMismatch | None = None
        self._known_generation = 0
        self.miss_events = 0  # every miss, retries included (``misses`` lists distinct ones)
        self.write_error: CassetteError | None = None  # disk full etc.: the first one
        self.tools = ToolLedger(self.path, mode, tools, dict(tool_overrides or {}),
                                normalize=self.matcher._normalize, lock=self._lock)
        # ``trace``: where to write what this run sent (``replay --twice`` compares two)
        self._trace_path = Path(trace) if trace is not None else None
        self._trace: list[dict[str, Any]] = []
        if self._trace_path is not None:
            self.tools.on_call = self._trace.append
        self._observers: list[Observer] = []
        self.worker = check_name(worker) if worker else None
        self._shard_by_worker = shard_by_worker

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop(exc)

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop(exc)

    def start(self) -> None:
        from hermes_replay import _intercept

        if self._active or self._writer is not None or self._index.by_key or self._issued:
            raise RuntimeError(f"this session of {self.path} was already used; a session is "
                               "entered once — call hermes_replay.cassette(...) again")
        existing = None
        if self.mode == "replay" or (self.mode == "auto" and self.path.exists()):
            with paused_gc():
                existing = self._load_index()
            self._recorded_outcomes = {k: dict(v) for k, v in existing.outcomes.items()}
            # progress can show totals ("3/12 rollouts"): seq carries the rollout count
            self._emit(ReplayEvent("loaded", None, len(self.recorded_rollouts), "",
                                   str(self.path)))
        if self.mode in ("record", "auto"):
            KNOWN.add_environ()  # what a tool printing its environment would show
            self._known_generation = KNOWN.generation
            if self.mode == "record":
                self._header = CassetteHeader()
            self._header = self._header.merged(
                {**self._header_fields, "matcher": self.matcher.signature()})
            try:
                self._writer = CassetteWriter(self.path, self._header)
            except OSError as exc:
                raise self._write_failed(exc, partial_path(self.path)) from None
            self.tools.writer = self._writer
        self._active = True
        _intercept.activate(self)  # binds this session to this context (``_active``)

    def _write_failed(self, exc: OSError, path: Path) -> CassetteError:
        """One clear error for a failed write (disk full, permissions): which file, why."""
        why = exc.strerror or str(exc)
        return CassetteError(
            f"cannot write the recording: {why} (errno {exc.errno})", path=path,
            hint="free disk space or fix the folder's permissions, then record again; the "
            f"previous cassette {self.path} (if any) is unchanged")

    def _journal(self, write: Callable[[CassetteWriter], None]) -> None:
        """Append to the journal; a failed write is kept for ``stop`` (and fails later
        requests at once) instead of surfacing as an error of the HTTP request."""
        if self._writer is None or self.write_error is not None:
            return
        try:
            write(self._writer)
        except OSError as exc:
            self.write_error = self._write_failed(exc, self._writer.partial)
            self._emit(ReplayEvent("failed", None, None, "", str(self._writer.partial),
                                   detail=str(self.write_error)))

    def _close_writer(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        except OSError:
            pass

    def _load_index(self) -> Cassette:
        """Load the cassette and index its recordings (see ``_index``)."""
        existing = load_cassette(self.path)
        self._header = existing.header
        self._index = RecordingIndex.build(existing, self.matcher)
        self.tools.load(existing)
        return existing

    def stop(self, exc: BaseException | None = None) -> None:
        from hermes_replay import _intercept

        if not self._active:
            return
        self._active = False
        _intercept.deactivate(self)
        if self._writer is not None:
            if exc is None and self.write_error is not None:
                self._close_writer()
                raise self.write_error
            if exc is None:
                try:
                    self._writer.commit(self._header, *self._rescrubbed(*self._final_contents()))
                except OSError as error:
                    self._close_writer()
                    raise self._write_failed(error, self.path) from None
            else:
                self._close_writer()
                self._emit(ReplayEvent("interrupted", None, None, "", str(self._writer.partial)))
        if self._trace_path is not None:
            self._write_trace(self._trace_path)
        if self.mode != "replay":
            return
        if exc is None and self._tokenizer_error is not None:
            raise self._tokenizer_error  # raised at annotate too, unless the env swallowed it
        if isinstance(exc, RequestNotRecorded):
            # the code under test let the miss through (no agent loop ended the rollout):
            # the block's verdict, with every miss and its diff, replaces it
            raise CassetteMiss(self.misses, cassette=self.path) from exc
        if exc is not None:
            if self.misses and hasattr(exc, "add_note"):
                exc.add_note(str(CassetteMiss(self.misses, cassette=self.path)))
            return
        if self.misses:
            raise CassetteMiss(self.misses, cassette=self.path)
        if self.strict and self.unused:
            raise UnusedRecordings(self.unused, cassette=self.path)
        unused_tools = self._mine(self.tools.unused)
        if self.strict and (self.tools.drift or unused_tools):
            raise ToolCallsDrifted(self.tools.drift, unused_tools, self.path)

    # ------------------------------------------------------------------ interception

    def wants(self, method: str, url: str) -> bool:
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
        return is_recorded_endpoint(url)  # a tool's HTTP API declared as rollout traffic

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
        if self.mode == "passthrough":
            with self._lock:
                self._passthrough += 1
            return _Exchange(self, "passthrough", rollout)
        if rollout is not None and self.mode in ("replay", "auto"):
            exact = self._exact_hit(rollout, wire)
            if exact is not None:
                return exact
        request = stored_request(wire, self.keep_headers)
        fp = self.matcher.fingerprint(request)
        with self._lock:
            issue = self._issue(rollout)
            if self.mode in ("replay", "auto"):
                rec = self._find(rollout, fp)
                if rec is not None:
                    return self._hit(rec, rollout, issue, request, wire.method)
                if self.mode == "replay" and rollout is None and is_health_ping(request):
                    return _Exchange(self, "replay", rollout, issue, request, fp,
                                     response=health_reply(request))
                if self.mode == "replay":
                    self.miss_events += 1
                    known = len(self._miss_index)
                    miss = self._miss(rollout, request, fp)
                    if len(self._miss_index) > known:  # one event per miss, as counted
                        self._emit(ReplayEvent("miss", rollout, miss.seq, wire.method,
                                               request["url"], None, detail=miss.reason))
                    self._traced(rollout, issue, request)
                    # ends this request now: no retry layer (all catch Exception) sees it
                    raise RequestNotRecorded(miss)
        if self.write_error is not None:  # nothing more can be written: stop the run now
            raise self.write_error
        return _Exchange(self, "record", rollout, issue, request, fp)

    def _exact_hit(self, rollout: str, wire: WireRequest) -> _Exchange | None:
        """The common case, cheaply: the request is byte for byte this turn's recording."""
        turn = self._cursor.get(rollout, 0)
        rec = self._index.by_key.get((rollout, turn))
        if rec is None or rec.used or not same_request(wire, rec.inter.request):
            return None
        with self._lock:
            if rec.used or self._cursor.get(rollout, 0) != turn:
                return None  # a concurrent request of this rollout took it meanwhile
            issue = self._issue(rollout)
            return self._hit(rec, rollout, issue, rec.inter.request, wire.method)

    def _issue(self, rollout: str | None) -> int:
        """The next order-of-issue number of ``rollout`` (caller holds the lock)."""
        issue = self._issued.get(rollout, 0)
        self._issued[rollout] = issue + 1
        return issue

    def _hit(self, rec: Recording, rollout: str | None, issue: int, request: dict[str, Any],
             method: str) -> _Exchange:
        """Use ``rec`` for this request (caller holds the lock)."""
        rec.used = True
        self._cursor[rollout] = self._cursor.get(rollout, 0) + 1
        self._hits.append((rollout, issue, rec.inter))
        self._emit(ReplayEvent("hit", rollout, rec.inter.seq, method, request["url"],
                               rec.inter.response.get("status")))
        self._traced(rollout, issue, request)
        return _Exchange(self, "replay", rollout, issue, request, rec.fingerprint,
                         response=wire_response(rec.inter.response))

    def _traced(self, rollout: str | None, issue: int, request: dict[str, Any]) -> None:
        if self._trace_path is not None:  # canonical: as matching sees it (ignores, normalizers)
            self._trace.append({"kind": "request", "rollout": rollout, "seq": issue,
                                "turn": issue, "request": self.matcher.canonical(request)})

    def _write_trace(self, path: Path) -> None:
        """What this run sent, one JSON line per request, tool call and reward (already
        redacted), for ``replay --twice`` to compare with another run."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(e, ensure_ascii=False, default=str) + "\n"
                          for e in self._trace)

    def _find(self, rollout: str | None, fp: str) -> Recording | None:
        return self._index.find(rollout, self._cursor.get(rollout, 0), fp)

    def _miss(self, rollout: str | None, request: dict[str, Any], fp: str) -> Miss:
        turn = self._cursor.get(rollout, 0)
        key = (rollout, turn, fp)
        if key not in self._miss_index:  # else: a retry of a request that already missed
            self._miss_index[key] = self._index.diagnose(self.path, rollout, turn, request,
                                                         self.matcher)
        return self._miss_index[key]

    def _recorded(self, ex: _Exchange, wire: WireResponse) -> None:
        response = stored_response(wire, self.keep_headers)
        path = urlsplit(ex.request["url"]).path
        kind = TOOL_HTTP if is_recorded_endpoint(ex.request["url"]) else interaction_kind(path)
        inter = Interaction(rollout=ex.rollout, seq=ex.issue, kind=kind,
                            request=ex.request, response=response, fingerprint=ex.fingerprint,
                            duration_ms=(time.perf_counter() - ex.started) * 1000)
        with self._lock:
            if not self._active:  # a late response after the block ended: not written
                self._emit(ReplayEvent("failed", ex.rollout, None, ex.request["method"],
                                       ex.request["url"], wire.status, detail="after close"))
                return
            if not self._new and not self._hits:
                self._derive_header(inter)
            self._new.append((ex.rollout, ex.issue, inter))
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

    # ------------------------------------------------------------------ tool calls

    def tool_call(self, name: str, arguments: Any, run: Callable[[], Any], *,
                  source: str = "agent") -> Any:
        """Record, replay or execute one tool call (``hermes_replay.tool_call`` lands here)."""
        scope = current_rollout()
        rollout = scope.id if scope is not None else None
        with self._lock:
            turn = self._issued.get(rollout, 0) - 1  # the LLM turn this call answers
        return self.tools.call(name, arguments, run, source=source, rollout=rollout, turn=turn)

    # ------------------------------------------------------------------ environment reports

    def observe(self, observer: Observer) -> None:
        """Also tell ``observer`` what the environment reports to this session (finished
        rollouts, annotations), as reported and before anything is redacted or written."""
        self._observers.append(observer)

    def rollout_finished(self, scope: RolloutScope) -> None:
        for observer in self._observers:
            observer.rollout_finished(scope)
        if not scope.outcome:
            return
        outcome = redact_json(dict(scope.outcome))  # final messages echo model/tool text
        with self._lock:
            if self._trace_path is not None:
                self._trace.append({"kind": "outcome", "rollout": scope.id,
                                    "reward": outcome.get("reward")})
            self._new_outcomes.setdefault(scope.id, {}).update(outcome)
            self._journal(lambda w: w.outcome(scope.id, outcome))

    def annotate(self, fields: dict[str, Any]) -> None:
        for observer in self._observers:
            observer.annotate(dict(fields))
        fields = redact_fields(fields)
        fields = dict(fields)
        if "worker" in fields:
            self._set_worker(fields["worker"])
        tokenizer = fields.get("tokenizer")
        if isinstance(tokenizer, dict):
            if self.mode == "replay":
                del fields["tokenizer"]  # the recorded one stays: it points at the store
                self.check_tokenizer(tokenizer)
            elif self.mode in ("record", "auto"):
                fields["tokenizer"] = with_store(self.path, tokenizer)
        with self._lock:
            self._header = self._header.merged(fields)
            self._journal(lambda w: w.annotate(fields))

    def _set_worker(self, name: Any) -> None:
        try:
            name = check_name(str(name))
        except ValueError:
            return  # not an identity; the field stays in the header for a human to see
        with self._lock:
            self.worker = name
            if self._shard_by_worker and self._writer is not None and self.mode == "record":
                suffix = ".jsonl.zst" if self.path.name.endswith(".zst") else ".jsonl"
                self.path = self.path.with_name(name + suffix)
                self._writer.retarget(self.path)

    def _unused(self) -> tuple[list[tuple[str | None, int]], int]:
        """Recordings never requested that were this worker's to request, and how many
        belong to other workers (caller holds the lock)."""
        keys = self._index.unused()
        mine = self._mine(keys)
        return mine, len(keys) - len(mine)

    def _mine(self, keys: list[tuple[str | None, int]]) -> list[tuple[str | None, int]]:
        """The ``(rollout, seq)`` keys of this worker (all of them when it has no identity)."""
        if self.worker is None:
            return keys
        return [k for k in keys if k[0] is None or owner(k[0]) == self.worker]

    # ------------------------------------------------------------------ tokenizer

    def check_tokenizer(self, loaded: dict[str, Any]) -> None:
        """Replay: raise ``TokenizerMismatch`` when ``loaded`` is not the recorded tokenizer."""
        if self.mode != "replay" or not self._active:
            return
        error = mismatch(self.path, self._header.tokenizer, loaded)
        if error is not None:
            self._tokenizer_error = error
            raise error

    def stored_tokenizer(self, name: str) -> Path | None:
        """The copy of tokenizer ``name`` stored with this cassette, if it has one."""
        recorded = self._header.tokenizer or {}
        return stored_dir(self.path, recorded) if recorded.get("name") == name else None

    # ------------------------------------------------------------------ results

    def _final_contents(self) -> tuple[list[Interaction], dict[str, dict[str, Any]],
                                       list[ToolCall]]:
        """What a clean close writes: this run's interactions (record), or the union (auto)."""
        touched = {r for r, _, _ in self._new if r is not None}
        out: list[Interaction] = []
        outcomes: dict[str, dict[str, Any]] = {}
        if self.mode == "auto" and self.drop_unrun:
            # a rollout of the old file this run never made is stale: gone, as in ``record``
            touched |= set(self.summary().never_ran)
        if self.mode == "auto":
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
                entries.setdefault(rollout, []).append((issue, inter))
        for rollout, items in entries.items():
            items.sort(key=lambda item: item[0])
            base = 0
            if rollout is None:
                base = 1 + max((i.seq for i in out if i.rollout is None), default=-1)
            for rank, (_, inter) in enumerate(items):
                out.append(inter.model_copy(update={"seq": base + rank}))
        outcomes.update(self._new_outcomes)
        touched |= {c.rollout for c in self.tools.new if c.rollout is not None}
        return out, outcomes, self.tools.final(touched)

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
                tools_replayed=self.tools.replayed,
                tools_executed=self.tools.executed,
                tool_drift=list(self.tools.drift),
                unused_tools=self._mine(self.tools.unused)
                if self.mode in ("replay", "auto") else [],
            )

    def _rerecorded(self) -> dict[str, int]:
        """auto: turns recorded anew per rollout (lock held)."""
        out: dict[str, int] = {}
        for rollout, _, _ in self._new:
            key = rollout if rollout is not None else "<no rollout>"
            out[key] = out.get(key, 0) + 1
        return out

    def _emit(self, event: ReplayEvent) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # progress output must never break a run
                pass
