"""The rollout snapshot: readable, stable, and a changed reward names its rollout."""

import difflib

import pytest

from hermes_replay._runner.result import RolloutOutcome, RunResult
from hermes_replay.snapshot import RolloutSnapshotExtension, render_run


def _run(reward_of_second: float) -> RunResult:
    return RunResult(
        env_name="demo",
        rollouts=[
            RolloutOutcome("train-bbb-0-1", reward=reward_of_second, turns=3, finished=True,
                           tool_errors=1),
            RolloutOutcome("train-aaa-0-0", reward=1.0, turns=2, finished=True, tool_errors=0),
        ],
        eval_metrics={"eval/mean_reward": 0.5, "eval/total_time_seconds": 12.3},
        wandb={"train/mean_reward": 0.75, "train_perf/task_duration_avg": 0.2},
    )


def test_render_is_sorted_and_drops_timing_metrics():
    text = render_run(_run(0.5))
    lines = text.splitlines()
    assert lines[0] == "# hermes-replay rollout snapshot v1"
    rows = [line for line in lines if line.startswith("  train-")]
    assert [r.split()[0] for r in rows] == ["train-aaa-0-0", "train-bbb-0-1"]
    assert "0.5000" in rows[1]
    assert "time" not in text and "duration" not in text
    assert "eval/mean_reward" in text and "train/mean_reward" in text


def test_changed_reward_is_a_one_line_diff_naming_the_rollout():
    before, after = render_run(_run(0.5)), render_run(_run(0.25))
    changed = [
        line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == [
        "-  train-bbb-0-1  0.5000  3  yes  1",
        "+  train-bbb-0-1  0.2500  3  yes  1",
    ]


def test_extension_serializes_run_results_only():
    ext = RolloutSnapshotExtension()
    assert ext.serialize(_run(0.5)) == render_run(_run(0.5))
    with pytest.raises(TypeError, match="RunResult"):
        ext.serialize({"not": "a run"})


def test_changed_rewards_against_recording():
    run = _run(0.25)
    run.recorded_rewards = {"train-aaa-0-0": 1.0, "train-bbb-0-1": 0.5}
    assert run.changed_rewards() == {"train-bbb-0-1": (0.5, 0.25)}
    assert run.mean_reward == pytest.approx(0.625)


def test_a_run_with_no_rollouts_or_an_error_is_never_a_snapshot(tmp_path):
    from pathlib import Path

    from hermes_replay import HermesReplayError, ReplayFailed

    ext = RolloutSnapshotExtension()
    empty = RunResult(env_name="demo", exit_code=0, cassette=Path("c.jsonl"), out_dir=tmp_path)
    with pytest.raises(HermesReplayError, match=r"c\.jsonl: refusing to snapshot a run with no "
                                                r"rollouts \(exit code 0\)"):
        ext.serialize(empty)
    failed = _run(0.5)
    failed.error = ReplayFailed("c.jsonl", "the environment exited with code 1", exit_code=1,
                                never_ran=[], recorded=2, log=None, log_tail=[], hint="fix it")
    with pytest.raises(HermesReplayError, match="refusing to snapshot a run that failed "
                                                r"\(ReplayFailed: c\.jsonl: the replay"):
        ext.serialize(failed)
