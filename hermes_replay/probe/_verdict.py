"""Verdicts on probe runs, and the report: a table for people, JSON for CI.

Rules (a *finding* makes ``hermes-replay probe`` exit 1):

* ``hack`` — a degenerate probe earned at least the threshold on some rollout. The threshold
  is ``--threshold`` if given, else the middle of the declared reward range (0.5 for [0, 1]),
  lowered to the known-good probe's mean when that is known and lower (a degenerate policy
  that earns what a correct one earns is a hack whatever the number).
* ``known-good-low`` — the known-good probe scored below the middle of the range (or
  ``--threshold``) on some rollout: the reward rejects a correct answer.
* ``out-of-range`` / ``nan`` / ``raised`` — a reward outside the declared range, NaN, or a
  ``compute_reward`` that raised (the base env scores those 0.0 and says why).
* ``crashed`` / ``ran-nothing`` — the environment exited non-zero, or scored no rollout.
* ``nondeterministic`` — the replay of the same replies scored differently (or could not be
  replayed: the environment asked something else the second time).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from hermes_replay.probe._runner import ProbeRun

__all__ = ["ProbeFinding", "ProbeReport", "ProbeRow", "judge_runs"]

DEFAULT_RANGE = (0.0, 1.0)
#: The built-in probe that plays the env's own known-good replies: with none offered it is n/a.
#: A user's own ``kind="known-good"`` probe brings its replies and is judged on what it scored.
HOOKED_PROBE = "known-good"


@dataclass(frozen=True)
class ProbeFinding:
    probe: str
    kind: str
    message: str


@dataclass
class ProbeRow:
    """One line of the table."""

    probe: str
    kind: str
    description: str
    rollouts: int
    mean: float | None
    max: float | None
    turns: float | None
    verdict: str  # "ok" | "FINDING" | "n/a"
    note: str = ""
    cassette: str = ""
    findings: list[ProbeFinding] = field(default_factory=list)


@dataclass
class ProbeReport:
    """The battery's result for one environment."""

    env_file: str
    items: int
    threshold: float
    known_good_mean: float | None
    reward_range: tuple[float, float]
    rows: list[ProbeRow]
    threshold_given: bool = False
    #: ``HERMES_SANDBOX`` policy the probes' tool calls ran under while recording: "bwrap"
    #: (kernel isolation), or "none" (the user's own opt-out); replays always use "bwrap".
    sandbox: str = "bwrap"

    @property
    def findings(self) -> list[ProbeFinding]:
        return [f for row in self.rows for f in row.findings]

    @property
    def ok(self) -> bool:
        return not self.findings

    def row(self, probe: str) -> ProbeRow:
        return next(r for r in self.rows if r.probe == probe)

    def title(self) -> str:
        return f"probe report: {self.env_file} ({self.items} items per probe)"

    def table(self) -> tuple[list[str], list[list[str]], str]:
        """Headers, rows and column alignment of the table (the CLI draws it with rich)."""
        rows = [[r.probe, _num(r.mean), _num(r.max), _num(r.turns, 1),
                 r.verdict + (f"  {r.note}" if r.note else "")] for r in self.rows]
        return ["probe", "mean", "max", "turns", "verdict"], rows, "lrrrl"

    def footer(self) -> list[str]:
        """The rule used, then each finding (or that there is none)."""
        lo, hi = self.reward_range
        basis = ("given" if self.threshold_given else "the known-good mean"
                 if self.known_good_mean is not None
                 and self.known_good_mean < _mid(self.reward_range) else "the range's middle")
        out = [f"  threshold {self.threshold:.2f} ({basis}; declared range [{lo:g}, {hi:g}])"]
        if self.findings:
            out.append(f"{len(self.findings)} finding(s):")
            out += [f"  - {f.probe}: {f.kind}: {f.message}" for f in self.findings]
        else:
            out.append("no findings")
        return out

    def lines(self, style: Any = None) -> list[str]:
        """The whole report: title, table, rule, findings. Plain text unless ``style`` is a
        terminal's (the CLI's ``Style``), then the table is drawn by rich like every CLI table."""
        from hermes_replay._terminal.render import table  # rich: loaded only when a report prints

        headers, rows, align = self.table()
        drawn = table(headers, rows, align=align, style=style)
        return [self.title(), *("  " + line for line in drawn.splitlines()), *self.footer()]

    def to_json(self) -> dict[str, Any]:
        return {
            "env_file": self.env_file, "items": self.items, "threshold": self.threshold,
            "known_good_mean": self.known_good_mean, "reward_range": list(self.reward_range),
            "ok": self.ok, "sandbox": self.sandbox, "probes": [asdict(r) for r in self.rows],
            "findings": [asdict(f) for f in self.findings],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, allow_nan=False, default=str)

    def assert_clean(self) -> None:
        """Raise ``AssertionError`` with the whole table when there is any finding."""
        if self.findings:
            raise AssertionError("\n".join(self.lines()))


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.{digits}f}"


def _mid(rng: tuple[float, float]) -> float:
    return rng[0] + 0.5 * (rng[1] - rng[0])


def reward_range(runs: list[ProbeRun], given: tuple[float, float] | None) -> tuple[float, float]:
    """``given``, else what the env declared (``reward_range`` annotation), else [0, 1]."""
    if given is not None:
        return given
    for run in runs:
        declared = run.annotations.get("reward_range")
        if isinstance(declared, (list, tuple)) and len(declared) == 2:
            try:
                return float(declared[0]), float(declared[1])
            except (TypeError, ValueError):
                continue
    return DEFAULT_RANGE


def judge_runs(env_file: str, items: int, runs: list[ProbeRun], *,
               threshold: float | None = None,
               declared: tuple[float, float] | None = None) -> ProbeReport:
    """Apply the rules of the module docstring to the runs of one battery."""
    rng = reward_range(runs, declared)
    base = threshold if threshold is not None else _mid(rng)
    kg_mean = _known_good_mean(runs)
    degenerate_at = base
    if threshold is None and kg_mean is not None:
        degenerate_at = min(base, kg_mean)
    rows = [_row(run, rng, base, degenerate_at) for run in runs]
    return ProbeReport(env_file, items, degenerate_at, kg_mean, rng, rows,
                       threshold_given=threshold is not None)


def _known_good_mean(runs: list[ProbeRun]) -> float | None:
    for run in runs:
        offered = run.known_good_offers or run.probe.name != HOOKED_PROBE
        if run.probe.kind == "known-good" and offered and run.error is None:
            values = [r for r in run.rewards.values() if r is not None and not math.isnan(r)]
            if values:
                return sum(values) / len(values)
    return None


def _row(run: ProbeRun, rng: tuple[float, float], base: float, degenerate_at: float) -> ProbeRow:
    probe = run.probe
    # NaN is reported below as a finding of its own; it takes no part in mean/max.
    rewards = {k: v for k, v in run.rewards.items() if v is not None and not math.isnan(v)}
    values = list(rewards.values())
    turns = [int(o.get("turns_used") or 0) for o in run.outcomes.values()]
    row = ProbeRow(probe.name, probe.kind, probe.description, len(run.outcomes),
                   sum(values) / len(values) if values else None,
                   max(values) if values else None,
                   sum(turns) / len(turns) if turns else None, "ok",
                   cassette=str(run.cassette))
    found = row.findings.append

    def finding(kind: str, message: str) -> None:
        found(ProbeFinding(probe.name, kind, message))

    skipped = probe.not_applicable(run.tools)
    if probe.name == HOOKED_PROBE and not run.known_good_offers and run.error is None:
        skipped = ("the env offers no known-good reply (known_good_reply hook, or "
                   "--known-good TEMPLATE)")
    if run.error is not None:
        finding("crashed", run.error)
    elif not run.outcomes:
        finding("ran-nothing", f"no rollout was scored; see {run.log}")
    for rid, outcome in sorted(run.outcomes.items()):
        error = outcome.get("reward_error")
        reward = outcome.get("reward")
        if error:
            kind = "nan" if "NaN" in str(error) else "raised"
            finding(kind, f"compute_reward on {rid}: {error}")
        elif reward is None and run.error is not None:
            continue  # the rollout never got scored: the crash above says why
        elif not isinstance(reward, (int, float)) or math.isnan(reward):
            finding("nan", f"{rid} has no numeric reward ({reward!r})")
        elif not rng[0] - 1e-9 <= reward <= rng[1] + 1e-9:
            finding("out-of-range", f"{rid} scored {reward:g}, outside [{rng[0]:g}, {rng[1]:g}]")
    if skipped is None and values:
        worst_id = max(rewards, key=lambda k: rewards[k])
        if probe.kind == "degenerate" and rewards[worst_id] >= degenerate_at:
            finding("hack", f"scored {rewards[worst_id]:.2f} >= {degenerate_at:.2f} on {worst_id} "
                    f"({probe.description}); cassette {run.cassette}")
        if probe.kind == "known-good":
            low = {k: v for k, v in rewards.items() if v < base}
            if low:
                first = min(low, key=lambda k: low[k])
                finding("known-good-low", f"the known-good reply scored {low[first]:.2f} < "
                        f"{base:.2f} on {first}; cassette {run.cassette}")
    _nondeterminism(run, finding)
    if row.findings:
        row.verdict = "FINDING"
        row.note = ", ".join(dict.fromkeys(f.kind for f in row.findings))
    elif skipped is not None:
        row.verdict, row.note = "n/a", skipped
    return row


def _nondeterminism(run: ProbeRun, finding: Any) -> None:
    if run.replay_error is not None:
        finding("nondeterministic", f"replaying the same replies failed: {run.replay_error}")
        return
    if run.replay_rewards is None:
        return
    first = run.rewards
    differ = {rid: (first.get(rid), again) for rid, again in run.replay_rewards.items()
              if not _same(first.get(rid), again)}
    missing = sorted(set(first) - set(run.replay_rewards))
    if differ:
        rid, (a, b) = sorted(differ.items())[0]
        finding("nondeterministic", f"same replies, different reward on {len(differ)} rollout(s), "
                f"e.g. {rid}: {a} then {b}")
    elif missing:
        finding("nondeterministic", f"the replay did not score {', '.join(missing)}")


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= 1e-9
