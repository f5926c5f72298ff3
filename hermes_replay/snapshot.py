"""A syrupy extension that stores a run's rewards as a readable table.

One line per rollout, each naming its rollout id, so a changed reward shows in pytest's
output as a one-line diff that says which rollout moved; ``--snapshot-update`` accepts
it. Floats are fixed to a few decimals and timing metrics are left out, so snapshot
files are identical across runs and machines.

    from hermes_replay.snapshot import RolloutSnapshotExtension

    def test_rewards(replay_run, snapshot):
        assert replay_run() == snapshot(extension_class=RolloutSnapshotExtension)

A run with no rollouts, or one that failed (``replay_run(raise_errors=False)`` hands those
back), is refused: its table would be empty or partial, and accepting it with
``--snapshot-update`` would hide every later reward change.
"""

from __future__ import annotations

import re
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from hermes_replay._errors import HermesReplayError
from hermes_replay._runner.result import RunResult

__all__ = ["RolloutSnapshotExtension", "render_run"]

FORMAT_LINE = "# hermes-replay rollout snapshot v1"
# Metrics that measure wall time or throughput change every run; never snapshot them.
VOLATILE_METRIC = re.compile(r"(time|duration|perf|seconds|per_sec|throughput|timestamp)", re.I)


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, dict) and value.get("_type") == "table":
        return f"table[{', '.join(value.get('columns', []))}] × {value.get('rows')} rows"
    return str(value)


def _metric_lines(metrics: dict[str, Any]) -> list[str]:
    keys = sorted(k for k in metrics if not VOLATILE_METRIC.search(k))
    width = max((len(k) for k in keys), default=0)
    return [f"  {k.ljust(width)}  {_num(metrics[k])}" for k in keys]


def render_run(result: RunResult) -> str:
    """The snapshot text of a run (also handy for printing)."""
    lines = [FORMAT_LINE, f"env: {result.env_name or '-'}", ""]
    lines.append("rollouts: id · reward · turns · finished · tool errors")
    ordered = sorted(result.rollouts, key=lambda r: r.id)
    width = max((len(r.id) for r in ordered), default=0)
    for r in ordered:
        lines.append(
            f"  {r.id.ljust(width)}  {_num(r.reward)}  {_num(r.turns)}  "
            f"{_num(r.finished)}  {_num(r.tool_errors)}"
        )
    if result.eval_metrics:
        lines += ["", "eval metrics:", *_metric_lines(result.eval_metrics)]
    if result.wandb:
        lines += ["", "wandb metrics (last value):", *_metric_lines(result.wandb)]
    return "\n".join(lines) + "\n"


def _refuse_a_run_that_proves_nothing(result: RunResult) -> None:
    where = f"{result.cassette}: " if result.cassette else ""
    if result.error is not None:
        raise HermesReplayError(
            f"{where}refusing to snapshot a run that failed "
            f"({type(result.error).__name__}: {str(result.error).splitlines()[0]}); next step: "
            "fix what the error says — a failed run's rewards are not a reference")
    if not result.rollouts:
        raise HermesReplayError(
            f"{where}refusing to snapshot a run with no rollouts (exit code "
            f"{result.exit_code}): an empty table would accept any later reward change; next "
            "step: make the replay run its rollouts (see the env log in "
            f"{result.out_dir or 'the run folder'})")


class RolloutSnapshotExtension(SingleFileSnapshotExtension):
    """Stores ``RunResult`` objects as ``<test name>.rollouts.txt`` beside the test."""

    file_extension = "rollouts.txt"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **kwargs: Any) -> str:
        if isinstance(data, RunResult):
            _refuse_a_run_that_proves_nothing(data)
            return render_run(data)
        if isinstance(data, str):
            return data
        raise TypeError(
            f"RolloutSnapshotExtension snapshots a hermes_replay RunResult, got "
            f"{type(data).__name__}; pass the object returned by the replay_run fixture."
        )
