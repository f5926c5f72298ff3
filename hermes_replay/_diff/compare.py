"""Compare two runs: cassettes, replay results, or one of each. Pure functions, no printing.
(Over 400 lines: the three inputs' views and the comparison share one data model.)

Each input becomes a ``RunView`` — rollouts (reward, turns, …), metrics and, for cassettes,
the recorded transcripts — and ``compare(a, b)`` returns a ``DiffReport``:

* reward changes per rollout (old → new, delta) and other outcome changes (turns, finished,
  tool errors);
* rollouts only in A / only in B;
* the first diverging turn of each transcript both sides recorded: the rollout, the turn
  (its request/response ``seq``), the field that differs (``request.messages[3].content``,
  ``response.message.tool_calls``, …) and a short unified diff of that message;
* the first differing recorded tool call of each rollout both cassettes hold (``_diff.tool_calls``);
* metric deltas: eval metrics a run reported (``metrics.json``), and per phase metrics
  derived from the rollouts (``rollouts:eval/mean_reward`` …) so two cassettes — which hold
  no ``metrics.json`` — still compare on their eval rewards.

A replay result holds no transcripts (its requests matched the cassette, or it reports the
misses), so transcripts are compared only between two cassettes.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette import Cassette, Interaction
from hermes_replay._cassette.files import read_head
from hermes_replay._cassette.forks import fork_of
from hermes_replay._cassette.labels import labels
from hermes_replay._cassette.load import load_cassette
from hermes_replay._cassette.matching import (
    DEFAULT_IGNORE_PATHS,
    FieldChange,
    _flatten,
    field_changes,
)
from hermes_replay._cassette.parts import parts_changes
from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._diff.tool_calls import first_tool_divergence
from hermes_replay._errors import CassetteError
from hermes_replay._runner.result import RolloutOutcome, RunResult, is_group_record
from hermes_replay._runner.result_io import RESULT_FILE, load_run_result, run_result_from_output_dir

__all__ = [
    "DIFF_SCHEMA",
    "NO_ROLLOUT",
    "DiffReport",
    "Divergence",
    "MetricDelta",
    "OutcomeChange",
    "RolloutView",
    "RunView",
    "compare",
    "compare_paths",
    "first_divergence",
    "load_view",
    "view_from_cassette",
    "view_from_result",
]

DIFF_SCHEMA = 1
NO_ROLLOUT = "<no rollout>"  # the transcript of requests made outside any rollout scope
# Outcome fields compared besides the reward (cassette outcome key -> view attribute).
_OUTCOME_FIELDS = ("turns", "finished", "tool_errors")
# Request body keys that say nothing about the conversation (mirrors the matcher's ignores).
_IGNORED_BODY_KEYS = {p.split(".", 1)[1] for p in DEFAULT_IGNORE_PATHS if p.startswith("body.")}
_ASSISTANT_FIELDS = ("role", "content", "tool_calls", "reasoning_content", "reasoning",
                     "function_call", "refusal")


# One rollout of either side: the same record a replay result holds.
RolloutView = RolloutOutcome


@dataclass
class RunView:
    """One side of a diff. ``transcripts`` is None when the input holds none (a result)."""

    label: str
    kind: str  # "cassette" | "result"
    env_name: str | None = None
    rollouts: dict[str, RolloutView] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    transcripts: dict[str, list[Interaction]] | None = None
    misses: list[str] = field(default_factory=list)
    tool_calls: dict[str, list[ToolCall]] | None = None
    names: dict[str, str] = field(default_factory=dict)  # rollout -> its item's label
    #: a cassette: its file; a result: the cassette it replayed (whose transcripts it matched)
    source: Path | None = None
    fork: dict[str, Any] | None = None  # a fork's branch: its link to its parent

    @property
    def turn_count(self) -> int:
        return sum(len(t) for t in (self.transcripts or {}).values())


@dataclass(frozen=True)
class OutcomeChange:
    """A rollout whose reward or other outcome field differs (``delta`` only for rewards)."""

    rollout: str
    phase: str
    reward_a: float | None
    reward_b: float | None
    delta: float | None
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def reward_changed(self) -> bool:
        return self.reward_a != self.reward_b


@dataclass(frozen=True)
class Divergence:
    """The first turn where two recorded transcripts of one rollout differ, and every field
    that differs in it (a changed date in the system prompt never hides a changed question)."""

    rollout: str
    #: 1-based, as every message counts turns (the interaction's seq + 1); None for a tool
    #: call the reward made (it answers no turn)
    turn: int | None
    field: str  # the first: "request.messages[2].content", "response.message.content", …
    diff: str  # every differing field's lines (A = -, B = +), may be ""
    #: each differing field with its own lines, in order (empty for a turn-count divergence)
    changes: tuple[FieldChange, ...] = ()

    @property
    def fields(self) -> list[str]:
        return [c.field for c in self.changes] or [self.field]


@dataclass(frozen=True)
class MetricDelta:
    name: str
    a: float | None
    b: float | None
    delta: float | None


@dataclass
class DiffReport:
    a: RunView
    b: RunView
    changes: list[OutcomeChange] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    tool_divergences: list[Divergence] = field(default_factory=list)  # first per rollout
    metrics: list[MetricDelta] = field(default_factory=list)
    compared_rollouts: int = 0
    compared_metrics: int = 0
    notes: list[str] = field(default_factory=list)  # e.g. misses a result reports
    #: a result compared with the cassette it replayed: its misses in full (each a diff of the
    #: request against the nearest recording, message lists as sequences) — its transcripts
    request_misses: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.changes or self.only_a or self.only_b or self.divergences
                    or self.tool_divergences or self.metrics or self.a.misses or self.b.misses)

    def name_of(self, rollout: str) -> str | None:
        """The rollout's label (its item's name), B's before A's; None without one."""
        return self.b.names.get(rollout) or self.a.names.get(rollout)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (schema ``DIFF_SCHEMA``, documented in ``_cli/diff.py``)."""

        def side(v: RunView) -> dict[str, Any]:
            return {"path": v.label, "kind": v.kind, "env_name": v.env_name,
                    "rollouts": len(v.rollouts), "misses": list(v.misses)}

        return json_safe({
            "schema_version": DIFF_SCHEMA,
            "equal": self.equal,
            "a": side(self.a),
            "b": side(self.b),
            "compared_rollouts": self.compared_rollouts,
            "rewards": [
                {"rollout": c.rollout, "label": self.name_of(c.rollout), "phase": c.phase,
                 "a": c.reward_a, "b": c.reward_b,
                 "delta": c.delta,
                 "fields": {k: {"a": x, "b": y} for k, (x, y) in c.fields.items()}}
                for c in self.changes
            ],
            "only_in_a": list(self.only_a),
            "only_in_b": list(self.only_b),
            "divergences": [asdict(d) for d in self.divergences],
            "tool_divergences": [asdict(d) for d in self.tool_divergences],
            "metrics": [asdict(m) for m in self.metrics],
            "notes": list(self.notes),
            "request_misses": list(self.request_misses),
        })


# --------------------------------------------------------------------------- reading inputs


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    if isinstance(value, (list, tuple)):
        return len(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _derived_metrics(rollouts: dict[str, RolloutView]) -> dict[str, float]:
    """Per phase: mean reward and rollout count, so eval rewards compare without metrics.json."""
    out: dict[str, float] = {}
    phases = sorted({r.phase for r in rollouts.values()})
    for phase in phases:
        group = [r for r in rollouts.values() if r.phase == phase]
        rewards = [r.reward for r in group if r.reward is not None]
        out[f"rollouts:{phase}/count"] = float(len(group))
        if rewards:
            out[f"rollouts:{phase}/mean_reward"] = sum(rewards) / len(rewards)
    return out


def view_from_cassette(cassette: Cassette, label: str | None = None) -> RunView:
    rollouts: dict[str, RolloutView] = {}
    for rid, rec in cassette.rollouts.items():
        if is_group_record(rec.outcome):  # a plain env's group: its rollouts carry rewards
            continue
        rollouts[rid] = RolloutOutcome.from_outcome(rid, rec.outcome or {})
    transcripts = {rid: sorted(rec.interactions, key=lambda i: i.seq)
                   for rid, rec in cassette.rollouts.items()}
    _own_samples(cassette, transcripts)
    if cassette.scopeless:  # requests outside any rollout (a judge, setup calls)
        transcripts[NO_ROLLOUT] = sorted(cassette.scopeless, key=lambda i: i.seq)
    tool_calls: dict[str, list[ToolCall]] = {}
    for call in cassette.tool_calls:
        tool_calls.setdefault(call.rollout or NO_ROLLOUT, []).append(call)
    return RunView(label=label or str(cassette.path), kind="cassette",
                   env_name=cassette.header.env_name, rollouts=rollouts,
                   metrics=_derived_metrics(rollouts), transcripts=transcripts,
                   tool_calls=tool_calls, names=labels(cassette.outcomes),
                   source=Path(cassette.path), fork=fork_of(cassette.header))


def _own_samples(cassette: Cassette, transcripts: dict[str, list[Interaction]]) -> None:
    """A plain env's rollout of an ``n > 1`` group gets the group's requests narrowed to its
    own sample (``_cassette.choices``), and the group's whole reply is no transcript of its
    own: a change in the third sample is the third rollout's divergence, never hidden behind
    an unchanged first sample."""
    from hermes_replay._cassette.choices import own_part

    shown_through: set[str] = set()
    for rid, rec in cassette.rollouts.items():
        outcome = rec.outcome or {}
        group = cassette.rollouts.get(str(outcome.get("traffic") or ""))
        if rec.interactions or group is None or group is rec:
            continue
        own = own_part(list(group.interactions), outcome)
        if own is not None:
            transcripts[rid] = own
            shown_through.add(group.id)
    for gid in shown_through:
        transcripts.pop(gid, None)


def view_from_result(result: RunResult, label: str = "<run result>") -> RunView:
    rollouts = {
        r.id: RolloutView(id=r.id, phase=r.phase, reward=_float(r.reward), turns=r.turns,
                          finished=r.finished, tool_errors=_count(r.tool_errors),
                          label=r.label, parts=r.parts)
        for r in result.rollouts
    }
    metrics = _derived_metrics(rollouts)
    for name, value in result.eval_metrics.items():
        number = _float(value)
        if number is not None:
            metrics[name] = number
    return RunView(label=label, kind="result", env_name=result.env_name, rollouts=rollouts,
                   metrics=metrics, transcripts=None, misses=list(result.misses),
                   names={r.id: r.label for r in result.rollouts if r.label},
                   source=Path(result.cassette) if result.cassette else None)


def _is_result_file(path: Path) -> bool:
    if path.suffix == ".json":
        return True
    try:
        head = read_head(path, 200).decode("utf-8", "replace").lstrip()
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("{") and '"hermes-replay-result"' in head


def _result_below(folder: Path, other: Path | None) -> Path | None:
    """The ``result.json`` of one cassette in the main job's output folder (``OUT/<cassette>/
    result.json``): the only one there, or the one that replayed ``other``, the cassette it
    is compared with. None when the folder holds none, or several and none of them fits."""
    found = sorted(p for p in folder.glob(f"*/{RESULT_FILE}") if p.is_file())
    if len(found) == 1:
        return found[0]
    if other is None or not other.is_file():
        return None
    wanted = other.resolve()
    for candidate in found:
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        named = data.get("cassette") if isinstance(data, dict) else None
        if isinstance(named, str) and Path(named).resolve() == wanted:
            return candidate
    return None


def load_view(path: str | Path, other: str | Path | None = None) -> RunView:
    """A cassette (``.jsonl``/``.partial``), a ``result.json``, or a replay output folder
    (its own ``result.json``, or for the main job's ``--out`` folder the one of the cassette
    ``other`` names, or its only one).

    Raises ``CassetteError`` naming the path (and line) when it cannot be used.
    """
    from hermes_replay._cassette.merge import SHARDS_SUFFIX

    path = Path(path)
    if path.is_dir() and path.name.endswith(SHARDS_SUFFIX):  # the cassette its shards make
        return view_from_cassette(load_cassette(path), str(path))
    if path.is_dir():
        if (path / RESULT_FILE).is_file():
            return view_from_result(load_run_result(path / RESULT_FILE), str(path / RESULT_FILE))
        found = run_result_from_output_dir(path)
        if found is not None:
            return view_from_result(found, str(path))
        below = _result_below(path, None if other is None else Path(other))
        if below is not None:
            return view_from_result(load_run_result(below), str(below))
        several = sorted(p.parent.name for p in path.glob(f"*/{RESULT_FILE}"))
        raise CassetteError(
            f"a folder with no {RESULT_FILE} and no evaluate metrics.json"
            + (f"; it holds the results of {len(several)} cassettes ({', '.join(several[:5])})"
               if several else ""), path=path,
            hint=(f"pass one of them, e.g. {path / several[0]}" if several else
                  f"pass a cassette (.jsonl), a {RESULT_FILE} or the --out folder of "
                  "`hermes-replay replay` (or an evaluate output folder)"))
    if path.is_file() and _is_result_file(path):
        return view_from_result(load_run_result(path), str(path))
    return view_from_cassette(load_cassette(path), str(path))


# --------------------------------------------------------------------------- comparing


def _close(a: float | None, b: float | None, tol: float) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):  # NaN on both sides is no change; on one side it is
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=0.0, abs_tol=tol)


def _delta(a: float | None, b: float | None) -> float | None:
    """``b - a``, or None when either is missing or not finite (no number says how far a
    reward moved to or from NaN)."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return b - a


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as the string ``"NaN"``, ``"Infinity"`` or
    ``"-Infinity"``: ``--json`` must be JSON, and ``json.dumps`` would print bare ``NaN``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _assistant(inter: Interaction) -> dict[str, Any]:
    """The reply of one interaction, as a comparable dict (message fields + finish reason)."""
    resp = inter.response or {}
    body = resp.get("body")
    if isinstance(body, dict) and body.get("choices"):
        choice = body["choices"][0] if isinstance(body["choices"][0], dict) else {}
        msg = choice.get("message")
        out: dict[str, Any] = {}
        if isinstance(msg, dict):
            out = {k: msg.get(k) for k in _ASSISTANT_FIELDS if msg.get(k) is not None}
        elif "text" in choice:
            out = {"text": choice.get("text")}
        if choice.get("finish_reason") is not None:
            out["finish_reason"] = choice["finish_reason"]
        return out
    if resp.get("chunks") is not None:
        from hermes_replay._cassette.messages import assistant_from_response

        msg = assistant_from_response(resp) or {}
        return {k: msg.get(k) for k in _ASSISTANT_FIELDS if msg.get(k) is not None}
    return {"status": resp.get("status"), "body": body}


def _readable(value: Any) -> Any:
    """Tool-call arguments (a JSON string) as their object, so the diff shows one line per
    argument (a changed shell command reads as itself, not as an escaped JSON string).
    Only for display: the comparison itself is on the recorded bytes."""
    if isinstance(value, list):
        return [_readable(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _readable(v) for k, v in value.items()}
    args = out.get("arguments")
    if "name" in out and isinstance(args, str):
        try:
            out["arguments"] = json.loads(args)
        except ValueError:
            pass
    return out


def _render(value: Any) -> list[str]:
    lines: list[str] = []
    _flatten(_readable(value), "", lines)
    return lines


def _turn_view(inter: Interaction) -> dict[str, Any]:
    """What a diff compares of one turn: the request (messages and the other body fields the
    matcher keeps, the URL if it is not the usual one) and the reply."""
    body = inter.request.get("body") if isinstance(inter.request.get("body"), dict) else {}
    request = {k: v for k, v in body.items() if k not in _IGNORED_BODY_KEYS}
    request["url"] = inter.request.get("url")
    return {"request": request, "response": {"message": _assistant(inter)}}


def _turn_changes(ia: Interaction, ib: Interaction) -> list[FieldChange]:
    if ia.request == ib.request and _assistant(ia) == _assistant(ib):
        return []
    return field_changes(_render(_turn_view(ia)), _render(_turn_view(ib)))


def first_divergence(rollout: str, a: list[Interaction], b: list[Interaction]) -> Divergence | None:
    """Walk both transcripts turn by turn; at the first that differs, every field that does
    (messages, other request fields, the reply), each with its own lines."""
    for ia, ib in zip(a, b, strict=False):
        changes = _turn_changes(ia, ib)
        if changes:
            diff = "\n".join(line for c in changes for line in c.lines)
            name = changes[0].field
            if name.startswith("request.messages[") and len(changes) == 1 and all(
                    line.startswith("+") for line in changes[0].lines):
                name += " (only in B)"
            return Divergence(rollout, ia.seq + 1, name, diff, tuple(changes))
    if len(a) != len(b):
        longer, side = (a, "A") if len(a) > len(b) else (b, "B")
        extra = longer[min(len(a), len(b))]
        return Divergence(rollout, extra.seq + 1, f"turn count ({len(a)} in A, {len(b)} in B; "
                          f"turn {extra.seq + 1} only in {side})", "")
    return None


def _forked_divergence(report: DiffReport, rid: str, a: RunView, b: RunView
                       ) -> Divergence | None:
    """The first divergence of ``rid``'s transcripts; where B is a fork's branch of that
    rollout (``diff PARENT BRANCH``), from the fork's turn K on, once the shared turns
    1..K-1 are checked equal (a prefix that differs is said: B is no branch of this A)."""
    assert a.transcripts is not None and b.transcripts is not None
    ta, tb = a.transcripts.get(rid, []), b.transcripts.get(rid, [])
    link = b.fork
    if link is None or link.get("rollout") != rid:
        return first_divergence(rid, ta, tb)
    k = int(link["turn"])
    shared = first_divergence(rid, ta[:k - 1], tb[:k - 1])
    if shared is not None:
        report.notes.append(f"B is a branch forked at turn {k} of rollout {rid}, but its "
                            f"turns 1..{k - 1} differ from A's at turn {shared.turn}: A is not "
                            "its parent as recorded")
        return shared
    report.notes.append(f"B is a branch of A: rollout {rid} forked at turn {k}; turns "
                        f"1..{k - 1} are equal (shared), compared from turn {k}")
    return first_divergence(rid, ta[k - 1:], tb[k - 1:])


def compare(a: RunView, b: RunView, *, tolerance: float = 1e-9) -> DiffReport:
    """Everything that differs between ``a`` (old) and ``b`` (new)."""
    report = DiffReport(a, b)
    if a.env_name and b.env_name and a.env_name != b.env_name:
        report.notes.append(f"A is environment {a.env_name!r}, B is {b.env_name!r}")
    report.only_a = sorted(set(a.rollouts) - set(b.rollouts))
    report.only_b = sorted(set(b.rollouts) - set(a.rollouts))
    shared = sorted(set(a.rollouts) & set(b.rollouts))
    report.compared_rollouts = len(shared)
    for rid in shared:
        ra, rb = a.rollouts[rid], b.rollouts[rid]
        fields = {f: (getattr(ra, f), getattr(rb, f)) for f in _OUTCOME_FIELDS
                  if getattr(ra, f) is not None and getattr(rb, f) is not None
                  and getattr(ra, f) != getattr(rb, f)}
        if ra.parts and rb.parts:  # the reward's named parts: "correct 1 → 0"
            fields.update(parts_changes(ra.parts, rb.parts))
        if not _close(ra.reward, rb.reward, tolerance) or fields:
            reward_b = rb.reward if not _close(ra.reward, rb.reward, tolerance) else ra.reward
            report.changes.append(OutcomeChange(rid, ra.phase, ra.reward, reward_b,
                                                _delta(ra.reward, reward_b), fields))
        if a.transcripts is not None and b.transcripts is not None:
            div = _forked_divergence(report, rid, a, b)
            if div is not None:
                report.divergences.append(div)
    if a.transcripts is not None and b.transcripts is not None and (
            NO_ROLLOUT in a.transcripts or NO_ROLLOUT in b.transcripts):
        div = first_divergence(NO_ROLLOUT, a.transcripts.get(NO_ROLLOUT, []),
                               b.transcripts.get(NO_ROLLOUT, []))
        if div is not None:
            report.divergences.append(div)
    if a.tool_calls is not None and b.tool_calls is not None:
        for rid in sorted(set(a.tool_calls) | set(b.tool_calls)):
            if rid != NO_ROLLOUT and rid not in shared:
                continue  # a rollout only one side has is reported as such already
            found = first_tool_divergence(rid, a.tool_calls.get(rid, []),
                                          b.tool_calls.get(rid, []))
            if found is not None:
                report.tool_divergences.append(Divergence(rid, *found))
    replayed = _replay_of(a, b)
    if replayed is not None:
        _replay_transcripts(report, *replayed)
    elif a.transcripts is None or b.transcripts is None:
        which = " and ".join(v.label for v in (a, b) if v.transcripts is None)
        report.notes.append(f"transcripts not compared: {which} is a replay result (it holds "
                            "rewards and metrics, not transcripts) of another cassette")
    _compare_metrics(report, a, b, tolerance)
    for v, name in ((a, "A"), (b, "B")):
        if v.misses:
            report.notes.append(f"{name} ({v.label}) had {len(v.misses)} replay miss(es); "
                                f"first: {v.misses[0].splitlines()[0]}")
    return report


def _same_file(x: Path | None, y: Path | None) -> bool:
    try:
        return x is not None and y is not None and x.resolve() == y.resolve()
    except OSError:
        return False


def _replay_of(a: RunView, b: RunView) -> tuple[RunView, RunView, str] | None:
    """(the cassette, the result that replayed it, which side the result is) — a replay's
    transcripts are its cassette's wherever a request matched, so they can be compared."""
    for cas, res, side in ((a, b, "B"), (b, a, "A")):
        if cas.kind == "cassette" and res.kind == "result" and _same_file(cas.source,
                                                                          res.source):
            return cas, res, side
    return None


def _replay_transcripts(report: DiffReport, cassette: RunView, result: RunView,
                        side: str) -> None:
    """A result beside the cassette it replayed: every request the replay sent was matched
    against that recording, so the conversation is the recording's except where it missed —
    and each miss is already a diff of the request against the nearest recording."""
    if not result.misses:
        report.notes.append(
            f"transcripts: every request of {side} ({result.label}) was answered from this "
            f"recording ({cassette.label}): its conversations are the recorded ones (up to "
            "the cassette's normalizers)")
        return
    report.request_misses = list(result.misses)


def _compare_metrics(report: DiffReport, a: RunView, b: RunView, tol: float) -> None:
    # A metric one side cannot have (a cassette has no metrics.json) is not a difference;
    # one that a result reported and the other result did not, is.
    names = sorted(set(a.metrics) | set(b.metrics))
    same_kind = a.kind == b.kind
    for name in names:
        va, vb = a.metrics.get(name), b.metrics.get(name)
        derived = name.startswith("rollouts:")
        if (va is None or vb is None) and not (same_kind or derived):
            continue
        report.compared_metrics += 1
        if not _close(va, vb, tol):
            report.metrics.append(MetricDelta(name, va, vb, _delta(va, vb)))


def compare_paths(a: str | Path, b: str | Path, *, tolerance: float = 1e-9) -> DiffReport:
    """``compare(load_view(a), load_view(b))``; raises ``CassetteError`` for unusable input."""
    return compare(load_view(a, other=b), load_view(b, other=a), tolerance=tolerance)
