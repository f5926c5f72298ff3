"""What one offline run of an environment produced: the object tests and snapshots compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_replay._errors import HermesReplayError
    from hermes_replay._session.summary import ReplaySummary

__all__ = ["RewardChange", "RolloutOutcome", "RunResult", "is_group_record"]

RewardChange = tuple[float | None, float | None]  # (recorded, replayed)


@dataclass(frozen=True)
class RolloutOutcome:
    """One rollout as the environment scored it (reported through ``RolloutScope.report``)."""

    id: str
    phase: str = "train"
    reward: float | None = None
    turns: int | None = None
    finished: bool | None = None
    tool_errors: int | None = None
    #: the item's readable name (``_cassette/labels.py``): shown beside the id, never identity
    label: str | None = field(default=None, compare=False)
    #: the reward's named parts (``_cassette/parts.py``), as the env reported them
    parts: dict[str, float] | None = field(default=None, compare=False)

    @classmethod
    def from_outcome(cls, rollout_id: str, outcome: dict[str, Any],
                     label: str | None = None) -> RolloutOutcome:
        """From an outcome record; tolerant of missing or mistyped fields (cassettes are input).
        ``label``: the rollout's name when its group gave it (else its own ``label``)."""
        from hermes_replay._cassette.labels import labels
        from hermes_replay._cassette.parts import clean_parts

        default_phase = "eval" if rollout_id.startswith("eval") else "train"
        return cls(
            id=rollout_id,
            phase=str(outcome.get("phase") or default_phase),
            reward=_number(outcome.get("reward")),
            turns=_count(outcome.get("turns_used")),
            finished=outcome.get("finished_naturally"),
            tool_errors=_count(outcome.get("tool_errors")),
            label=label or labels({rollout_id: outcome}).get(rollout_id),
            parts=clean_parts(outcome.get("parts")),
        )


def recorded_rewards(run: Any) -> dict[str, float | None]:
    """Each recorded rollout's reward in ``run`` (a loaded cassette; a plain env's group
    records are not rollouts): what a replay's rewards are compared with."""
    return {rid: (None if rec.outcome.get("reward") is None else float(rec.outcome["reward"]))
            for rid, rec in run.rollouts.items()
            if rec.outcome and not is_group_record(rec.outcome)}


def is_group_record(outcome: Any) -> bool:
    """A plain env's group (``_runner.plain_groups``): its scores, not a rollout of its own."""
    return isinstance(outcome, dict) and outcome.get("kind") == "group"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


@dataclass
class RunResult:
    """The scored groups, rewards, eval metrics and wandb metrics of one run."""

    command: list[str] = field(default_factory=list)
    exit_code: int = 0
    env_name: str | None = None
    cassette: Path | None = None
    rollouts: list[RolloutOutcome] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    eval_metrics: dict[str, Any] = field(default_factory=dict)
    wandb: dict[str, Any] = field(default_factory=dict)  # the last value of each metric
    #: every ``wandb_log`` call's metrics, in order (``wandb`` is their last values)
    wandb_steps: list[dict[str, Any]] = field(default_factory=list, compare=False)
    misses: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    recorded_rewards: dict[str, float | None] = field(default_factory=dict)
    out_dir: Path | None = None
    #: what stopped the run being a clean one (a miss, a refused recording …), if anything;
    #: ``run_cassette`` raises it unless called with ``raise_errors=False``
    error: HermesReplayError | None = field(default=None, compare=False, repr=False)
    #: the cassette session's own counts (interactions, misses, unused, recorded …)
    summary: ReplaySummary | None = field(default=None, compare=False, repr=False)
    #: machine defaults the harness settled for a plain env, each named once (``_runner.plain_env``)
    handled: list[str] = field(default_factory=list, compare=False)

    @property
    def rewards(self) -> dict[str, float | None]:
        """Reward per rollout id, sorted by id."""
        return {r.id: r.reward for r in sorted(self.rollouts, key=lambda r: r.id)}

    @property
    def mean_reward(self) -> float | None:
        values = [r.reward for r in self.rollouts if r.reward is not None]
        return sum(values) / len(values) if values else None

    def changed_rewards(self, tolerance: float = 1e-9) -> dict[str, RewardChange]:
        """Rollouts whose reward differs from the one recorded in the cassette."""
        changed: dict[str, RewardChange] = {}
        for rid, new in self.rewards.items():
            if rid not in self.recorded_rewards:
                continue
            old = self.recorded_rewards[rid]
            if (old is None) != (new is None) or (
                old is not None and new is not None and abs(old - new) > tolerance
            ):
                changed[rid] = (old, new)
        return changed
