"""Every shipped cassette replays offline, scores exactly as recorded, and is snapshotted.

The recorded outcome of each rollout (written by the base env at record time) is the
independent reference: replaying the same code must give the same reward per rollout. The
snapshot (``__snapshots__``) is what turns a deliberate reward change into a reviewable diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _sandbox_creations import SandboxCreations

from hermes_replay.snapshot import RolloutSnapshotExtension

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.stem for p in (ROOT / "environments").glob("*_env.py")
                  if p.stem != "hermes_base_env")
CASSETTES = sorted(p for p in (ROOT / "cassettes").glob("*/*.jsonl")
                   if p.stem in ("process", "evaluate"))
# `hermes-replay probe` runs, one per probe (cassettes/<env>/probe-<name>.jsonl).
PROBE_CASSETTES = sorted((ROOT / "cassettes").glob("*/probe-*.jsonl"))


def test_every_example_environment_has_process_evaluate_and_probe_cassettes() -> None:
    assert len(EXAMPLES) >= 3
    # every shipped cassette is replayed (and checked to create no sandbox) by a test below
    unreplayed = set((ROOT / "cassettes").glob("*/*.jsonl")) - {*CASSETTES, *PROBE_CASSETTES}
    assert not unreplayed, f"shipped cassettes no test here replays: {sorted(unreplayed)}"
    for stem in EXAMPLES:
        assert (ROOT / "cassettes" / stem / "probe-known-good.jsonl").is_file(), (
            f"cassettes/{stem}/probe-*.jsonl are missing: run hermes-replay probe "
            f"environments/{stem}.py"
        )
        for mode in ("process", "evaluate"):
            assert (ROOT / "cassettes" / stem / f"{mode}.jsonl").is_file(), (
                f"cassettes/{stem}/{mode}.jsonl is missing: run python scripts/record_cassettes.py"
            )


def _replayed_as_recorded(path: Path, replay_run, monkeypatch: pytest.MonkeyPatch):
    """Replay ``path`` strictly: ran, no miss, nothing unused, every recorded rollout scored
    and no reward moved — and with sandbox creation made impossible, so the replay executed
    nothing the cassette says (tools answered from it; ``test_replay_executes_nothing`` runs
    them on request)."""
    creations = SandboxCreations(monkeypatch, fail=True)
    result = replay_run(path, strict=True)
    assert result.exit_code == 0, (result.out_dir / "env.log").read_text()[-3000:]
    assert not result.misses and not result.unused
    assert result.rewards, "the replay scored no rollout"
    assert set(result.rewards) == set(result.recorded_rewards)
    assert result.changed_rewards() == {}
    assert creations.count == 0
    return result


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_shipped_cassette_replays_as_recorded(path: Path, replay_run, snapshot,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    result = _replayed_as_recorded(path, replay_run, monkeypatch)
    assert all(0.0 <= r <= 1.0 for r in result.rewards.values() if r is not None)

    mode = path.stem
    if mode == "process":
        # Several groups, multi-turn tool use, rewards that vary (GRPO needs spread).
        assert len(result.groups) >= 2
        assert len(set(result.rewards.values())) > 1
        for group in result.groups:
            assert len(group["tokens"]) == len(group["masks"]) == len(group["scores"]) >= 4
            for tokens, masks in zip(group["tokens"], group["masks"], strict=True):
                assert all(isinstance(t, int) for t in tokens) and len(tokens) == len(masks)
                assert -100 in masks and any(m != -100 for m in masks)
                assert all(m in (-100, t) for m, t in zip(masks, tokens, strict=True))
            assert group["messages"], "process mode must keep the messages"
        assert any(r.turns and r.turns > 1 for r in result.rollouts)
        assert any("train/" in key for key in result.wandb), result.wandb
    else:
        assert result.eval_metrics, "evaluate wrote no metrics.json"
        assert all(r.phase == "eval" for r in result.rollouts)
    assert result == snapshot(extension_class=RolloutSnapshotExtension)


@pytest.mark.parametrize("path", PROBE_CASSETTES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_probe_cassette_replays_as_recorded(path: Path, replay_run, snapshot,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe table is a regression snapshot: what each scripted policy earned stays put."""
    result = _replayed_as_recorded(path, replay_run, monkeypatch)
    assert result == snapshot(extension_class=RolloutSnapshotExtension)
