"""Re-scoring with a live judge (``--llm live=… [--rescore K]``, ``replay_corpus(live=…)``):
the cassette replayed K times with the selected calls live.

Run 1 writes ``<out>/<rel>/`` and ``<out>/<rel>.rescored.jsonl``, run k ≥ 2
``<out>/<rel>/rescore-k/`` and ``<out>/<rel>.rescored-k.jsonl``. The row is run 1's (the first
failing run's, if one failed: the rest are then not run), plus per rollout the recorded reward
beside the K new ones, so the table, ``replay.json`` and ``results`` carry it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hermes_replay._corpus.one import CassetteResult, RunHooks, attempt, shown_path
from hermes_replay._corpus.summary import RunSummary, failed
from hermes_replay._runner.options import RunOptions

__all__ = ["rescore_cassette", "rescore_stats"]


def rescore_cassette(cassette: Path, out_dir: Path, options: RunOptions, *, runs: int,
                     verbose: bool, hooks: RunHooks | None, mode: str) -> CassetteResult:
    spec = dict(options.live or {})
    rewards: list[dict[str, float | None]] = []
    recorded: dict[str, float | None] = {}
    summary: RunSummary | None = None
    first_cassette: Path | None = None
    message, result, error = "", None, None
    for k in range(1, runs + 1):
        run_out = out_dir if k == 1 else out_dir / f"rescore-{k}"
        suffix = "" if k == 1 else f"-{k}"
        rescored = out_dir.parent / f"{out_dir.name}.rescored{suffix}.jsonl"
        this, said, result, error = attempt(cassette, run_out, options, verbose=verbose,
                                            hooks=hooks, rescored=rescored)
        bad = failed(this) or result is None
        if summary is None or bad:
            summary, message = this, said
        if bad:
            break
        assert result is not None
        recorded = dict(result.recorded_rewards)
        rewards.append(dict(result.rewards))
        if k == 1:
            first_cassette = rescored
    assert summary is not None
    summary.cassette = str(cassette)
    patterns = ", ".join(f"live={p}" for p in spec.get("patterns", []))
    summary.live = f"{patterns} -> {spec.get('base_url')}"
    done = CassetteResult(cassette, out_dir, mode, summary, message, run=result, error=error)
    if failed(summary):
        return done
    summary.rescored_cassette = shown_path(first_cassette) if first_cassette else None
    if runs > 1:
        summary.rescore = rescore_stats(recorded, rewards)
        # a reward "changed" when the mean of the K new ones is not the recorded one
        summary.changed = {rid: (s["recorded"], s["mean"])
                           for rid, s in summary.rescore.items()
                           if rid in recorded and _differs(s["recorded"], s["mean"])}
    return done


def _differs(old: float | None, new: float | None) -> bool:
    if old is None or new is None:
        return (old is None) != (new is None)
    return abs(old - new) > 1e-9


def rescore_stats(recorded: dict[str, float | None],
                  runs: list[dict[str, float | None]]) -> dict[str, dict[str, Any]]:
    """Per rollout: the recorded reward, the K new ones, their mean, stdev (population),
    min and max (None where a run gave no reward)."""
    out: dict[str, dict[str, Any]] = {}
    ids = list(dict.fromkeys([rid for run in runs for rid in run]))
    for rid in sorted(ids):
        rewards = [run.get(rid) for run in runs]
        values = [r for r in rewards if r is not None]
        mean = sum(values) / len(values) if values else None
        spread = (math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
                  if values and mean is not None else None)
        out[rid] = {"recorded": recorded.get(rid), "rewards": rewards, "mean": mean,
                    "stdev": spread, "min": min(values) if values else None,
                    "max": max(values) if values else None}
    return out
