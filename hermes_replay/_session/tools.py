"""Tool calls under a cassette: recorded while recording, answered from the cassette on replay.

Environments route every tool call through ``hermes_replay.tool_call(name, arguments, run,
source=...)``, where ``run`` is a zero-argument callable that really executes the tool. What
happens to it depends on the active session's mode and its tool policy:

========== ====================================================================================
record     ``run()`` executes; the call and its result (or the exception) are written
passthrough ``run()`` executes; nothing is written
replay     policy ``replay`` (default): the recorded result is returned and ``run`` is never
           called — no sandbox, no subprocess, nothing a cassette says runs. A call with no
           recording is a miss (``ToolCallMiss`` raised in the caller, ``CassetteMiss`` when
           the block ends) with a field diff against the nearest recorded call.
           policy ``execute``: ``run()`` executes and its result is compared with the recording
           (after the session's ``normalizers``); a difference is *drift*, reported per call as
           a diff, a failure only when strict.
auto       a recorded call is answered from the cassette, a new one executes and is recorded
========== ====================================================================================

The policy is per session (``tools="replay"|"execute"``) and overridable per tool name
(``tool_overrides={"web_search": "execute"}``). Outside any cassette ``tool_call`` just runs.

Calls are keyed like LLM turns: ``(rollout, seq)``, ``seq`` counting the rollout's tool calls
in order of issue; a call issued out of order (reward code gathering several) is matched to
the first unused identical recording of its rollout. Arguments and results are redacted
before they are compared or written, exactly like LLM bodies.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from hermes_replay._cassette.matching import similarity
from hermes_replay._cassette.toolcalls import (
    ToolCall,
    exit_code_of,
    raised_record,
    reraise,
    tool_call_diff,
)
from hermes_replay._errors import Miss
from hermes_replay._secrets.payloads import scrub_payloads
from hermes_replay._secrets.redact import redact_json, redact_text
from hermes_replay._session.isolation import isolation_unless_decided
from hermes_replay._session.tool_errors import ToolCallMiss, ToolDrift
from hermes_replay._session.world_calls import Rebuild, WorldCalls
from hermes_replay._world.causality import AgentAction
from hermes_replay._world.rescore import SandboxWorld, Worlds

if TYPE_CHECKING:
    from hermes_replay._cassette import Cassette, CassetteWriter

__all__ = ["TOOL_POLICIES", "ToolCallMiss", "ToolDrift", "ToolLedger", "ToolPolicy",
           "check_policy", "tool_call"]

ToolPolicy = Literal["replay", "execute"]
TOOL_POLICIES: tuple[str, ...] = ("replay", "execute")
T = TypeVar("T")

_HINT = ("next step: if the change is intended, re-record the cassette (`hermes-replay record "
         "…`); to run the tools again instead of answering them from the cassette, replay with "
         "`--tools execute` (or `--tool NAME=execute` for one tool; tools='execute' in "
         "cassette()/run_cassette(), `--replay-tools execute` in pytest)")


def check_policy(policy: str, where: str = "tools") -> str:
    if policy not in TOOL_POLICIES:
        raise ValueError(f"unknown tool policy {policy!r} for {where}; choose one of "
                         f"{', '.join(TOOL_POLICIES)}")
    return policy


def _jsonable(value: Any) -> Any:
    """What a cassette can hold of ``value`` (tuples become lists, objects their repr)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


@dataclass
class _Recorded:
    call: ToolCall
    canon: str
    used: bool = False


@dataclass
class ToolLedger(WorldCalls):
    """A session's tool calls: the recorded ones (indexed) and those made in this run."""

    path: Path
    mode: str
    policy: str = "replay"
    overrides: Mapping[str, str] = field(default_factory=dict)
    normalize: Callable[[Any], Any] = lambda value: value
    old_format: bool = False  # the cassette predates tool records (schema 1)
    lock: threading.RLock = field(default_factory=threading.RLock)
    writer: CassetteWriter | None = None
    by_key: dict[tuple[str | None, int], _Recorded] = field(default_factory=dict)
    by_rollout: dict[str | None, list[_Recorded]] = field(default_factory=dict)
    issued: dict[str | None, int] = field(default_factory=dict)
    hits: list[tuple[int, ToolCall]] = field(default_factory=list)
    new: list[ToolCall] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    drift: list[ToolDrift] = field(default_factory=list)
    executed: int = 0
    rescored_calls: list[ToolCall] = field(default_factory=list)  # replay: run re-scoring
    isolation_error: str | None = None  # record/auto: the sandbox could not be created
    errored: int = 0  # executed calls whose result reports an error (``tool_errors`` rule)
    on_call: Callable[[dict[str, Any]], None] | None = None  # a trace of every call (--twice)
    on_miss: Callable[[Miss], None] | None = None  # the session's "miss" event (progress)
    workspace_limit: int | None = None  # bytes of workspace kept per rollout (None: default)
    #: the session's view of a rollout's model turns: why its agent side differs, or None
    agent_divergence: Callable[[str], str | None] | None = None
    agent_made: dict[str, list[AgentAction]] = field(default_factory=dict)
    rebuilds: dict[str, Rebuild] = field(default_factory=dict)
    fork: Any = None  # the session's ``ForkPoint`` in fork mode (``_session.forking``)
    _pending: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.worlds = Worlds(self.path, self.workspace_limit)
        check_policy(self.policy)
        for name, policy in self.overrides.items():
            check_policy(policy, f"tool {name!r}")

    # ------------------------------------------------------------------ loading

    def load(self, cassette: Cassette) -> None:
        self.old_format = cassette.header.schema_version < 2
        for call in cassette.tool_calls:
            rec = _Recorded(call, self._canon(call.request()))
            self.by_key[call.key] = rec
            self.by_rollout.setdefault(call.rollout, []).append(rec)
        for rid, outcome in cassette.outcomes.items():
            if isinstance(outcome, dict) and outcome.get("workspace") is not None:
                self.worlds.recorded[rid] = outcome["workspace"]

    def _canon(self, request: dict[str, Any]) -> str:
        return json.dumps(self.normalize(request), sort_keys=True, ensure_ascii=False)

    # ------------------------------------------------------------------ one call

    def call(self, name: str, arguments: Any, run: Callable[[], T], *, source: str,
             rollout: str | None, turn: int, world: SandboxWorld | None = None) -> T:
        if self.mode == "passthrough":
            return run()
        request = redact_json({"source": source, "name": name,
                               "arguments": _jsonable(arguments)})
        canon = self._canon(request)
        policy = self.overrides.get(name, self.policy)
        if source == "reward" and rollout is not None:
            if self.mode == "record":
                self.worlds.capture(rollout, world)
            elif policy == "replay":
                served, rec_call, seq = self.reward_call(name, request, canon, run, rollout,
                                                         turn, world)
                if served:
                    self._trace(rollout, seq, turn, request, None)
                    return self._answer(rec_call)  # type: ignore[return-value]
                return self._run_new(run, request, rollout, seq, turn, None, name)
        with self.lock:
            seq = self.issued.get(rollout, 0)
            self.issued[rollout] = seq + 1
            if source == "agent" and rollout is not None:
                self.note_agent(rollout, turn, name, request["arguments"], canon)
            rec = self._find(rollout, seq, canon) if self.mode in ("replay", "auto") else None
            rebuilt = False
            if self.mode == "auto" and source == "agent" and rollout is not None \
                    and policy == "replay":
                served, rec_call = self.auto_agent(rollout, seq, turn, request, rec, run)
                if served:
                    self._trace(rollout, seq, turn, request, None)
                    return self._answer(rec_call)  # type: ignore[return-value]
                rebuilt = True
            if rec is not None and policy == "replay" and not rebuilt:
                rec.used = True
                self.hits.append((seq, rec.call))
                self._trace(rollout, seq, turn, request, None)
                return self._answer(rec.call)  # type: ignore[return-value]
            if self.mode == "replay" and policy == "replay":
                miss = self._diagnose(rollout, seq, turn, request)
                self.misses.append(miss)
                if self.on_miss is not None:  # counted where LLM misses are: one event each
                    self.on_miss(miss)
                self._trace(rollout, seq, turn, request, None)
                raise ToolCallMiss(miss)
            if rec is not None:
                rec.used = True
        return self._run_new(run, request, rollout, seq, turn, rec, name)

    def _run_new(self, run: Callable[[], T], request: dict[str, Any], rollout: str | None,
                 seq: int, turn: int, rec: _Recorded | None, name: str) -> T:
        """Execute the call; record it (record/auto) or compare it with the recording."""
        value, call = self._execute(run, request, rollout, seq, turn)
        side = self.worlds.sides.get(rollout) if rollout is not None else None
        rescoring = request["source"] == "reward" and side is not None and side.rescoring
        if rescoring:
            call = call.model_copy(update={"origin": "rescored"})
        with self.lock:
            self.executed += 1
            self._trace(rollout, seq, turn, request, call.answer())
            if self.mode == "replay" and not rescoring:
                self._compare(rollout, seq, name, rec, call)
            elif self.mode == "replay":
                self.rescored_calls.append(call)
            else:
                self.new.append(call)
                if self.writer is not None:
                    self.writer.tool_call(call)
        if call.raised is not None:
            raise value
        return value

    def _execute(self, run: Callable[[], Any], request: dict[str, Any], rollout: str | None,
                 seq: int, turn: int) -> tuple[Any, ToolCall]:
        started = time.perf_counter()
        raised = None
        try:
            # A cassette's commands run isolated even in a bare cassette() block, unless a run
            # (run_cassette / the CLI, which know --trust-cassette) already set the policy.
            with isolation_unless_decided(self.mode):
                value = run()
        except Exception as exc:
            value, raised = exc, raised_record(exc)
            # no sandbox, no recording: a run whose tools all failed for want of isolation
            # must not be written as if the model had done badly (``Session.stop`` refuses it)
            if type(exc).__name__ == "IsolationUnavailableError" and self.isolation_error is None:
                self.isolation_error = redact_text(str(exc))
        result = None if raised is not None else redact_json(_jsonable(value))
        # a downloaded file is base64 in the result: its bytes are scrubbed too
        result = scrub_payloads(request["name"], result, redact_text)
        call = ToolCall(rollout=rollout, seq=seq, turn=turn, source=request["source"],
                        name=request["name"], arguments=request["arguments"], result=result,
                        exit_code=exit_code_of(result), raised=redact_json(raised),
                        duration_ms=(time.perf_counter() - started) * 1000)
        if raised is not None or call.exit_code not in (None, 0) or _reports_error(result):
            self.errored += 1
        return value, call

    def _trace(self, rollout: str | None, seq: int, turn: int, request: dict[str, Any],
               answer: dict[str, Any] | None) -> None:
        """Tell ``on_call`` (a replay trace) about a call; ``answer`` only when executed."""
        if self.on_call is not None:
            self.on_call({"kind": "tool", "rollout": rollout, "seq": seq, "turn": turn,
                          "name": request["name"], "request": self.normalize(request),
                          "answer": None if answer is None else self.normalize(answer)})

    @staticmethod
    def _answer(call: ToolCall) -> Any:
        if call.raised is not None:
            raise reraise(call.raised)
        return call.result

    def _find(self, rollout: str | None, seq: int, canon: str) -> _Recorded | None:
        rec = self.by_key.get((rollout, seq))
        if rec is not None and not rec.used and rec.canon == canon:
            return rec
        for rec in self.by_rollout.get(rollout, []):  # issued out of order (gathered calls)
            if not rec.used and rec.canon == canon:
                return rec
        return None

    def _diagnose(self, rollout: str | None, seq: int, turn: int,
                  request: dict[str, Any]) -> Miss:
        recs = self.by_rollout.get(rollout, [])
        nearest = self.by_key.get((rollout, seq))
        if self.old_format and not self.by_key:
            reason = ("this cassette was recorded before hermes-replay recorded tool calls "
                      "(schema 1), so it has no result to answer with")
        elif nearest is not None:
            reason = "the tool call differs from the recorded call at this position"
        elif recs:
            reason = f"rollout {rollout!r} has only {len(recs)} recorded tool call(s)"
        else:
            reason = f"the cassette has no tool call recorded for rollout {rollout!r}"
        if nearest is None and recs:
            lines = [json.dumps(request, sort_keys=True)]
            nearest = max(recs, key=lambda r: similarity([r.canon], lines))
        diff = ""
        if nearest is not None:
            n = nearest.call
            diff = tool_call_diff(n.request(), request,
                                  f"recorded (rollout {n.rollout or '-'}, tool call {n.seq})",
                                  "tool call")
        # seq: the LLM turn the call answers, so the headline reads "turn N: TOOL name"
        return Miss(str(self.path), rollout, turn, "TOOL",
                    f"{request['name']} (tool call {seq}, {request['source']}); nothing was "
                    f"executed", f"{reason}\n  {_HINT}", None, diff)

    def _compare(self, rollout: str | None, seq: int, name: str, rec: _Recorded | None,
                 call: ToolCall) -> None:
        if rec is None:
            nearest = self.by_key.get((rollout, seq))
            diff = "" if nearest is None else tool_call_diff(
                nearest.call.request(), call.request(), "recorded call", "executed call")
            self.drift.append(ToolDrift(rollout, seq, name, "not in the cassette (executed)",
                                        diff))
            return
        if self.normalize(rec.call.answer()) != self.normalize(call.answer()):
            self.drift.append(ToolDrift(rollout, seq, name, "result differs from the recording",
                                        tool_call_diff(rec.call.answer(), call.answer(),
                                                       "recorded", "executed now")))

    # ------------------------------------------------------------------ results

    @property
    def unused(self) -> list[tuple[str | None, int]]:
        with self.lock:
            return [key for key, rec in self.by_key.items() if not rec.used]

    @property
    def replayed(self) -> int:
        return len(self.hits)

    def final(self, touched: set[str], union: bool | None = None) -> list[ToolCall]:
        """What a clean close writes: this run's calls (record), or the union (auto, and a
        replay's rescored cassette: ``union=True``)."""
        out: list[ToolCall] = []
        if self.mode == "auto" if union is None else union:
            for rollout, recs in self.by_rollout.items():
                if rollout is None or rollout not in touched:
                    out.extend(r.call for r in recs)
        entries: dict[str | None, list[tuple[int, ToolCall]]] = {}
        for call in self.new:
            entries.setdefault(call.rollout, []).append((call.seq, call))
        for seq, call in self.hits:
            if call.rollout is not None and call.rollout in touched:
                entries.setdefault(call.rollout, []).append((seq, call))
        for rollout, items in entries.items():
            items.sort(key=lambda item: item[0])
            base = 0
            if rollout is None:
                base = 1 + max((c.seq for c in out if c.rollout is None), default=-1)
            out.extend(c.model_copy(update={"seq": base + rank})
                       for rank, (_, c) in enumerate(items))
        return out


def _reports_error(result: Any) -> bool:
    """A tool result that says it failed: ``{"error": ...}`` (as an object or JSON text)."""
    if isinstance(result, str) and result.lstrip().startswith("{"):
        try:
            result = json.loads(result)
        except ValueError:
            return False
    return isinstance(result, dict) and bool(result.get("error"))


def tool_call(name: str, arguments: Any, run: Callable[[], T], *, source: str = "agent",
              world: SandboxWorld | None = None) -> T:
    """Run one tool call through the active cassette (see the module docstring).

    ``run`` executes the tool and is called only when the session's policy says so; with no
    cassette active it is simply called. ``source`` is ``"agent"`` for calls the model made
    and ``"reward"`` for ``ToolContext`` calls of reward and evaluation code. ``world`` (reward
    calls) is the rollout's sandbox, so its workspace can be recorded before the reward's
    first call and restored for an offline re-score (``_world``).
    """
    from hermes_replay import _active

    session = _active.current()
    handle = getattr(session, "tool_call", None)
    if handle is None:
        return run()
    if world is None:
        return handle(name, arguments, run, source=source)
    return handle(name, arguments, run, source=source, world=world)
