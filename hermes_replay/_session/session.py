"""The cassette session: record policy, replay lookup, misses, outcomes.

Keyed by rollout identity: an LLM request made inside ``rollout(id)`` is the k-th request
of that rollout (``seq``), counted in order of issue; replay looks up ``(id, k)`` and checks
the fingerprint. Failed attempts while recording (exceptions, 5xx, 408/409/429) are not
written and take no number, so SDK and tenacity retries never shift a replay. Requests
outside any rollout fall back to fingerprint + order of issue.

Store (``_cassette``), matcher (``_cassette.matching``) and this policy are separate on purpose.
The session's state (per-rollout cursors and issue counters, hits, new recordings, misses)
is shared by every step of a request under one lock, so it lives in one class; its request
path (``_session.wire``) and its results (``_session.results``) are mixins beside it, the
index and miss diagnosis in ``_session.index``, the record shapes in ``_session.convert``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

from hermes_replay._cassette import (
    Cassette,
    CassetteHeader,
    CassetteWriter,
    Interaction,
    partial_path,
    paused_gc,
)
from hermes_replay._cassette.deferred import DeferredReader, read_deferred
from hermes_replay._cassette.load import load_cassette
from hermes_replay._cassette.matching import Matcher
from hermes_replay._cassette.model import STAGES_KEY
from hermes_replay._cassette.normalizer_checks import NormalizerTooSlow
from hermes_replay._cassette.normalizers import as_header
from hermes_replay._cassette.normalizers import expand as expand_normalizers
from hermes_replay._cassette.normalizers import from_header as normalizers_from_header
from hermes_replay._cassette.normalizers import specs as normalizer_specs
from hermes_replay._errors import (
    CassetteError,
    CassetteMiss,
    Miss,
    RequestNotRecorded,
    UnusedRecordings,
)
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import KEPT_HEADERS, CleanBodies, redact_fields, redact_json
from hermes_replay._session.forking import Forking, ForkPoint
from hermes_replay._session.index import RecordingIndex
from hermes_replay._session.live_calls import LiveCalls
from hermes_replay._session.liveness import Liveness
from hermes_replay._session.options import check_options
from hermes_replay._session.refusals import Refusals
from hermes_replay._session.results import Results
from hermes_replay._session.scope import RolloutScope, current_rollout
from hermes_replay._session.summary import ReplayEvent
from hermes_replay._session.tool_errors import ToolCallsDrifted
from hermes_replay._session.tools import ToolLedger
from hermes_replay._session.wire import WireHandling
from hermes_replay._session.workers import check_name
from hermes_replay._tokenizers.decode import token_decoder
from hermes_replay._tokenizers.store import TokenizerMismatch, mismatch, stored_dir, with_store

if TYPE_CHECKING:
    from hermes_replay._session.intercept import WireRequest

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



class Session(WireHandling, Results, Forking):
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
    ``"body.metadata"``, ``"body.messages[*].name"``) and ``normalizers`` (built-in names such
    as ``"datetime"``, or ``(regex, repl)`` applied to body strings; added to the ones the
    cassette's header keeps, and kept in the header of what record/auto write) for matching;
    ``default_ignores=False`` to match on ``user``/``metadata``/``stream_options`` too;
    ``llm_paths`` (POST path suffixes that are LLM traffic; everything else passes through
    untouched and is never written);
    ``passthrough_hosts`` (hosts never intercepted); ``keep_headers`` (header names stored
    as they are; every other header is dropped or redacted); ``on_event`` (progress callback);
    ``worker`` (this worker's identity, also set by ``annotate(worker=…)``: recordings of other
    workers are then not reported unused) and ``shard_by_worker`` (record: the file is renamed
    to ``<worker>.jsonl`` in its folder once the identity is known; see ``_session.workers``).

    Tool calls (made through ``hermes_replay.tool_call``) are recorded with their rollout; on
    replay ``tools="replay"`` (default) answers them from the cassette and executes nothing,
    ``tools="execute"`` runs them again and reports results that drifted (a failure only when
    ``strict``); ``tool_overrides={"name": "execute"}`` sets the policy of single tools.

    ``drop_unrun=True`` (auto): recorded rollouts this run never made are left out of the new
    file — for a full re-run of the recorded command (``record --missing-only``), where a
    rollout that no longer happens (its item changed) is stale, as ``record`` would drop it.

    ``fork={"rollout": R, "turn": K}`` (auto, on a copy of the parent cassette): rollout R is
    replayed before turn K and continued live from it, every other rollout replays exactly
    (``_session.forking``; ``hermes_replay.fork_rollout`` is the way to use it).
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
        live: LiveCalls | Mapping[str, Any] | None = None,
        workspace_limit: int | None = None,
        fork: ForkPoint | Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown cassette mode {mode!r}; choose one of {', '.join(MODES)}")
        # generators become tuples (checked and then used); a string stays, to be refused
        ignore_paths, normalizers, llm_paths, passthrough_hosts, keep_headers = (
            v if isinstance(v, (str, bytes)) else tuple(v)
            for v in (ignore_paths, normalizers, llm_paths, passthrough_hosts, keep_headers))
        check_options({"strict": strict, "ignore_paths": ignore_paths,
                       "normalizers": normalizers, "default_ignores": default_ignores,
                       "llm_paths": llm_paths, "passthrough_hosts": passthrough_hosts,
                       "keep_headers": keep_headers, "drop_unrun": drop_unrun,
                       "shard_by_worker": shard_by_worker})
        self.path = Path(path)
        self.mode: Mode = mode
        self.strict = strict
        try:
            #: the normalizers in force: the cassette's own (once loaded), then these
            self.normalizers: list[Any] = normalizer_specs(normalizers)
        except ValueError as exc:
            raise ValueError(f"normalizers: {exc}") from None
        self._given_normalizers = list(self.normalizers)
        self.matcher = Matcher.build(ignore_paths, expand_normalizers(self.normalizers),
                                     default_ignores=default_ignores)
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
        # replay reads bodies on first use (``_cassette.deferred``): what it found damaged
        # after start fails the request and the session's exit
        self._deferred: DeferredReader | None = None
        self._recorded_outcomes: dict[str, dict[str, Any]] = {}
        self._item_notes: dict[str, str] = {}  # rollout → what changed in its item
        # rollout → its answers (seq, stored response), kept while a plain env's group is open
        # (``_runner.plain_attrib`` matches each scored entry to the completion it came from)
        self._followed: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._issued: dict[str | None, int] = {}
        self._cursor: dict[str | None, int] = {}
        self._hits: list[tuple[str | None, int, Interaction]] = []
        self._new: list[tuple[str | None, int, Interaction]] = []
        self._lanes: dict[tuple[str | None, int], int | None] = {}
        self._answered: dict[str | None, int] = {}
        self._new_outcomes: dict[str, dict[str, Any]] = {}
        self._miss_index: dict[tuple[str | None, int, str], Miss] = {}
        self._root_misses: dict[str, Miss] = {}  # a rollout's first agent-turn miss
        self._reward_issued: dict[str, int] = {}  # reward calls issued, per rollout
        self._failed_attempts = 0
        self.refusals = Refusals()  # 4xx answers by status, with the endpoint's reason
        self._wants_memo: dict[tuple[str, str], bool] = {}  # ``wants``' answers
        self._unanswered: dict[str, int] = {}  # recordings of a rollout not answered yet
        self._clean_bodies = CleanBodies()  # each rollout's last request that needed no scrub
        self.live = Liveness()  # whether the endpoint answers (``_runner.dead_endpoint``)
        self._passthrough = 0
        self._tokenizer_error: TokenizerMismatch | None = None
        self._known_generation = 0
        self.miss_events = 0  # every miss, retries included (``misses`` lists distinct ones)
        # called at every miss event (the stall guard's poke: ``_runner.watchdog`` says why)
        self.miss_watchers: list[Callable[[], None]] = []
        self.write_error: CassetteError | None = None  # disk full etc.: the first one
        self.tools = ToolLedger(self.path, mode, tools, dict(tool_overrides or {}),
                                normalize=self.matcher._normalize, lock=self._lock,
                                workspace_limit=workspace_limit,
                                agent_divergence=self._agent_divergence)
        self.tools.on_miss = lambda miss: self._emit(ReplayEvent(
            "miss", miss.rollout, miss.seq, miss.method, miss.path, None, detail=miss.reason))
        # ``trace``: where to write what this run sent (``replay --twice`` compares two)
        self._trace_path = Path(trace) if trace is not None else None
        self._trace: list[dict[str, Any]] = []
        if self._trace_path is not None:
            self.tools.on_call = self._trace.append
        self._observers: list[Observer] = []
        self.worker = check_name(worker) if worker else None
        self._shard_by_worker = shard_by_worker
        #: the calls sent live on replay (``live=``): see ``_session.live_calls``
        self.live_calls: LiveCalls | None = None
        #: where this session forks a rollout (``_session.forking``), or None
        self.fork = ForkPoint.build(fork)
        if self.fork is not None:
            if mode != "auto":
                raise ValueError(f"fork= continues a recording live; it takes mode='auto', "
                                 f"not {mode!r}")
            self.tools.fork = self.fork
        if live is not None:
            if mode != "replay":
                raise ValueError(f"live= re-scores a replay; it takes mode='replay', not "
                                 f"{mode!r} (record/auto already send every call live)")
            self.live_calls = LiveCalls.build(live)

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

    def _expected_rollouts(self) -> int:
        """How many rollouts the run will report, counted as its summary counts them: the
        recorded outcomes less a plain env's group records (its ``n>1`` request is the
        group's traffic, each choice a rollout of its own); every rollout with traffic when
        the cassette keeps no outcomes."""
        outcomes = self._recorded_outcomes
        if not outcomes:
            return len(self.recorded_rollouts)
        return sum(1 for o in outcomes.values()
                   if not (isinstance(o, dict) and o.get("kind") == "group"))

    def start(self) -> None:
        from hermes_replay._session import intercept as _intercept

        if self._active or self._writer is not None or self._index.by_key or self._issued:
            raise RuntimeError(f"this session of {self.path} was already used; a session is "
                               "entered once — call hermes_replay.cassette(...) again")
        existing = None
        if self.mode == "replay" or (self.mode == "auto" and self.path.exists()):
            with paused_gc():
                existing = self._load_index()
            self._recorded_outcomes = {k: dict(v) for k, v in existing.outcomes.items()}
            # progress can show totals ("3/12 rollouts"): seq carries the rollout count
            self._emit(ReplayEvent("loaded", None, self._expected_rollouts(), "",
                                   str(self.path)))
        if self.live_calls is not None:  # the live key is known since build(): scrubbed
            self._known_generation = KNOWN.generation
        if self.mode in ("record", "auto"):
            KNOWN.add_environ()  # what a tool printing its environment would show
            self._known_generation = KNOWN.generation
            if self.mode == "record":
                self._header = CassetteHeader()
                # re-recording keeps the normalizers the cassette carried: they belong to it
                self._use_normalizers(self._previous_normalizers())
            self._header = self._header.merged(
                {**self._header_fields, "matcher": self.matcher.signature(),
                 "normalizers": as_header(self.normalizers), STAGES_KEY: True})
            try:
                self._writer = CassetteWriter(self.path, self._header)
            except OSError as exc:
                raise self._write_failed(exc, partial_path(self.path)) from None
            self.tools.writer = self._writer
        self._active = True
        _intercept.activate(self)  # binds this session to this context (``_active``)

    def begin(self, wire: WireRequest) -> Any:
        try:
            return super().begin(wire)
        except CassetteError as exc:
            if self._deferred is None or self._deferred.error is None:
                raise
            # a recording's line is damaged: this request fails as a miss does (no retry
            # layer sees it; agent loops end the rollout), and the session's exit raises it
            scope = current_rollout()
            rollout = scope.id if scope is not None else None
            raise RequestNotRecorded(Miss(str(self.path), rollout, self._cursor.get(rollout, 0),
                                          wire.method, urlsplit(wire.url).path,
                                          str(exc))) from exc

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
        """Load the cassette and index its recordings (see ``_session.index``). A replay
        defers each body's decoding to its first use when it can (``_cassette.deferred``)."""
        reader = read_deferred(self.path, self._signature_for) \
            if self.mode == "replay" else None
        if reader is not None and reader.cassette is not None:
            self._deferred, existing = reader, reader.cassette
            if self.live_calls is None:  # a rescored replay writes what it used back
                reader.allow_release()  # a rollout's decoded bodies go when it is answered
        else:
            existing = load_cassette(self.path)
        self._header = existing.header
        try:
            stored = normalizers_from_header(existing.header.normalizers)
        except ValueError as exc:
            raise CassetteError(f"bad header: normalizers: {exc}", path=self.path, line=1,
                                hint="fix or remove them with `hermes-replay normalize "
                                f"{self.path} --list/--remove`") from None
        self._use_normalizers(stored)
        try:
            self._index = RecordingIndex.build(existing, self.matcher)
        except NormalizerTooSlow as exc:  # refused at open, naming it
            raise CassetteError(f"bad header: normalizers: {exc}", path=self.path, line=1,
                                hint=f"`hermes-replay normalize {self.path}` lists them; "
                                "remove that one with --remove 'REGEX=REPLACEMENT'") from None
        tokenizer = existing.header.tokenizer
        self._index.decoder = lambda: token_decoder(self.path, tokenizer)
        self.tools.load(existing)
        return existing

    def _signature_for(self, header: CassetteHeader) -> str:
        """The signature of the matcher this replay will use with ``header``'s normalizers
        (what its stored fingerprints must have been made by to be trusted); "" if they do
        not read (the file is then read whole, and that names what is wrong)."""
        try:
            combined = normalizer_specs([*normalizers_from_header(header.normalizers),
                                         *self._given_normalizers])
            if combined == self.normalizers:
                return self.matcher.signature()
            return replace(self.matcher,
                           normalizers=expand_normalizers(combined)).signature()
        except ValueError:
            return ""

    def _use_normalizers(self, stored: list[Any]) -> None:
        """Match with the cassette's own normalizers (``stored``) and then the given ones."""
        combined = normalizer_specs([*stored, *self._given_normalizers])
        if combined == self.normalizers:
            return
        self.normalizers = combined
        self.matcher = replace(self.matcher, normalizers=expand_normalizers(combined))
        self.tools.normalize = self.matcher._normalize

    def _previous_normalizers(self) -> list[Any]:
        """The normalizers in the header of the cassette this recording will replace (none
        if there is none, or it is unreadable: the recording then starts afresh)."""
        import json

        from hermes_replay._cassette.files import first_line

        try:
            header = json.loads(first_line(self.path)) if self.path.is_file() else {}
            return normalizers_from_header(header.get("normalizers"))
        except (OSError, ValueError, AttributeError, CassetteError):
            return []

    def stop(self, exc: BaseException | None = None) -> None:
        from hermes_replay._session import intercept as _intercept

        if not self._active:
            return
        self._active = False
        _intercept.deactivate(self)
        if self._writer is not None:
            if exc is None and self.write_error is not None:
                self._close_writer()
                raise self.write_error
            if exc is None and self.tools.isolation_error is not None:
                self._close_writer()
                raise CassetteError(
                    "the tools' sandbox could not be created, so the tool calls failed and the "
                    f"rewards measure that, not the model: {self.tools.isolation_error}",
                    path=self.path, hint="install bubblewrap (`apt-get install bubblewrap`) "
                    "and record again; the previous cassette (if any) is unchanged")
            if exc is None and self.fork is not None:
                failure = self.fork.failure or self._fork_unreached()
                if failure is not None:  # nothing is written: the branch would not be one
                    self._close_writer()
                    raise failure
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
        if self._deferred is not None:
            # a damaged line fails the replay, named, also if the run never reached it
            damaged = self._deferred.check_all() if exc is None else self._deferred.error
            if damaged is not None:
                raise damaged from exc
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
        ran = {r for r, _, _ in self._hits if r is not None} | {
            r for r in self.tools.issued if r is not None}
        missed = {m.rollout for m in self.misses}
        with self._lock:
            self.tools.misses.extend(self.tools.unmade_agent_calls(ran, missed))
        if self.misses:
            raise CassetteMiss(self.misses, cassette=self.path)
        if self.strict and self.unused:
            raise UnusedRecordings(self.unused, cassette=self.path)
        unused_tools = self._mine(self.tools.unused)
        if self.strict and (self.tools.drift or unused_tools):
            raise ToolCallsDrifted(self.tools.drift, unused_tools, self.path)

    def write_rescored(self, path: str | Path) -> Path:
        """Write what this replay ran — the recorded policy calls it used and what the live
        calls answered, with this run's rewards — as a new cassette at ``path`` (atomically;
        the input cassette is never written). It replays offline like any recording."""
        from hermes_replay._cassette.write import write_cassette

        if self.live_calls is None:
            raise RuntimeError("write_rescored: this session sent nothing live (live=None)")
        target = Path(path)
        if target.resolve() == self.path.resolve():
            raise CassetteError("the rescored cassette would replace the one replayed",
                                path=target, hint="write it elsewhere (the CLI writes "
                                "<out>/<cassette>.rescored.jsonl)")
        with self._lock:
            contents = self._final_contents(union=True)
            self._header = self._header.merged({
                "matcher": self.matcher.signature(), "normalizers": as_header(self.normalizers),
                STAGES_KEY: True,
                "rescored": {**self.live_calls.header_fields(), "from": str(self.path)}})
            interactions, outcomes, calls = self._rescrubbed(*contents)
            header = self._header
        try:
            write_cassette(target, header, interactions, outcomes, calls)
        except OSError as exc:
            raise self._write_failed(exc, target) from None
        return target

    # ------------------------------------------------------------------ tool calls

    def tool_call(self, name: str, arguments: Any, run: Callable[[], Any], *,
                  source: str = "agent", world: Any = None) -> Any:
        """Record, replay or execute one tool call (``hermes_replay.tool_call`` lands here)."""
        scope = current_rollout()
        rollout = scope.id if scope is not None else None
        with self._lock:
            turn = self._issued.get(rollout, 0) - 1  # the LLM turn this call answers
        return self.tools.call(name, arguments, run, source=source, rollout=rollout, turn=turn,
                               world=world)

    def _agent_divergence(self, rollout: str) -> str | None:
        """Why ``rollout``'s model turns are not the recorded ones, or None: a request with no
        recording (replay), or one answered live (auto)."""
        with self._lock:
            for miss in self._miss_index.values():
                if miss.rollout == rollout and miss.reward_call is None:
                    return f"the model's request at turn {miss.turn} had no recording"
            for r, _, inter in self._new:
                if r == rollout and inter.stage != "reward":
                    return f"the model's turn {inter.seq + 1} was answered live"
        return None

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
        workspace = self._workspace_of(scope.id)
        if workspace is not None:  # already scrubbed, path by path and byte by byte
            outcome["workspace"] = workspace
        with self._lock:
            if self._trace_path is not None:
                self._trace.append({"kind": "outcome", "rollout": scope.id,
                                    "reward": outcome.get("reward")})
            self._new_outcomes.setdefault(scope.id, {}).update(outcome)
            self._journal(lambda w: w.outcome(scope.id, outcome))

    def _workspace_of(self, rollout: str) -> dict[str, Any] | None:
        """The workspace a rollout's outcome keeps: the one captured in this run, else the
        recorded one while its world is the recorded one (not rebuilt)."""
        captured = self.tools.worlds.captured.get(rollout)
        if captured is not None:
            return captured
        if rollout in self.tools.rebuilds:
            return None
        return self.tools.worlds.recorded.get(rollout)

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
                target = self.path.with_name(name + suffix)
                try:
                    self._writer.retarget(target)
                except CassetteError as exc:  # the identity is taken: stop the run now
                    if self.write_error is None:
                        self.write_error = exc
                    self._emit(ReplayEvent("failed", None, None, "", str(target),
                                           detail=str(exc)))
                    return
                self.path = target

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

    def _emit(self, event: ReplayEvent) -> None:
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # progress output must never break a run
                pass
