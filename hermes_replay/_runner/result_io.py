"""A replay result on disk: ``result.json``, so ``hermes-replay diff`` can compare runs.

A ``RunResult`` lives in memory (the pytest fixture, ``run_cassette``); CI wants to keep one
and compare it later. ``write_run_result(result, DIR)`` writes ``DIR/result.json``::

    {"type": "hermes-replay-result", "schema_version": 1, "env_name", "cassette", "command",
     "exit_code", "rollouts": [{"id", "phase", "reward", "turns", "finished", "tool_errors"}],
     "eval_metrics": {...}, "wandb": {...}, "misses": [...], "unused": [...],
     "recorded_rewards": {...}, "group_scores": [[...], ...]}

Scored groups are kept as their scores only: tokens and masks are large and are already in
the env's own ``groups.jsonl`` next to it. ``load_run_result`` reads it back; a bad file
raises ``CassetteError`` (the one "this input file cannot be used" error, with path, line
and next step). ``run_result_from_output_dir`` reads what ``evaluate`` itself writes
(``metrics.json`` + ``samples.jsonl``), so a replay output folder compares without a result.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hermes_replay._cassette.files import write_text_atomic
from hermes_replay._cassette.parts import clean_parts
from hermes_replay._errors import CassetteError
from hermes_replay._runner.result import RolloutOutcome, RunResult

__all__ = [
    "RESULT_FILE",
    "RESULT_SCHEMA",
    "load_run_result",
    "run_result_from_json",
    "run_result_from_output_dir",
    "run_result_to_json",
    "write_run_result",
]

RESULT_FILE = "result.json"
RESULT_TYPE = "hermes-replay-result"
RESULT_SCHEMA = 1
_REWRITE = ("write it again from the run (hermes_replay._runner.result_io.write_run_result), "
            "or compare the cassette instead")


def run_result_to_json(result: RunResult) -> dict[str, Any]:
    """A JSON-ready dict of ``result`` (stable key order; rollouts sorted by id)."""
    return {
        "type": RESULT_TYPE,
        "schema_version": RESULT_SCHEMA,
        "env_name": result.env_name,
        "cassette": None if result.cassette is None else str(result.cassette),
        "command": list(result.command),
        "exit_code": result.exit_code,
        "rollouts": [
            {"id": r.id, "phase": r.phase, "reward": r.reward, "turns": r.turns,
             "finished": r.finished, "tool_errors": r.tool_errors,
             **({"label": r.label} if r.label else {}),
             **({"parts": dict(r.parts)} if r.parts else {})}
            for r in sorted(result.rollouts, key=lambda r: r.id)
        ],
        "eval_metrics": dict(result.eval_metrics),
        "wandb": _jsonable(result.wandb),
        "wandb_steps": _jsonable(result.wandb_steps),
        "misses": list(result.misses),
        "unused": list(result.unused),
        "recorded_rewards": dict(sorted(result.recorded_rewards.items())),
        "group_scores": [list(g.get("scores") or []) for g in result.groups],
    }


def _jsonable(value: Any) -> Any:
    """wandb payloads may hold objects (tables, histograms): keep what JSON can hold."""
    return json.loads(json.dumps(value, default=repr))


def run_result_from_json(data: dict[str, Any]) -> RunResult:
    """The inverse of ``run_result_to_json`` (``groups`` hold only their scores)."""
    rollouts = [
        RolloutOutcome(id=str(r["id"]), phase=str(r.get("phase") or "train"),
                       reward=r.get("reward"), turns=r.get("turns"),
                       finished=r.get("finished"), tool_errors=r.get("tool_errors"),
                       label=r.get("label") if isinstance(r.get("label"), str) else None,
                       parts=clean_parts(r.get("parts")))
        for r in data.get("rollouts") or []
    ]
    cassette = data.get("cassette")
    return RunResult(
        command=list(data.get("command") or []),
        exit_code=int(data.get("exit_code") or 0),
        env_name=data.get("env_name"),
        cassette=None if cassette is None else Path(cassette),
        rollouts=rollouts,
        groups=[{"scores": s} for s in data.get("group_scores") or []],
        eval_metrics=dict(data.get("eval_metrics") or {}),
        wandb=dict(data.get("wandb") or {}),
        wandb_steps=[dict(s) for s in data.get("wandb_steps") or [] if isinstance(s, dict)],
        misses=list(data.get("misses") or []),
        unused=list(data.get("unused") or []),
        recorded_rewards=dict(data.get("recorded_rewards") or {}),
    )


def write_run_result(result: RunResult, path: str | Path) -> Path:
    """Write ``result`` to ``path`` (a folder gets ``path/result.json``); atomic. Returns it."""
    target = Path(path)
    if target.is_dir() or not target.suffix:
        target = target / RESULT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, json.dumps(run_result_to_json(result), indent=2,
                                         ensure_ascii=False) + "\n")
    return target


def load_run_result(path: str | Path) -> RunResult:
    """Read a ``result.json`` (or a folder holding one); raises ``CassetteError`` if unusable."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cannot read the replay result: {exc}", path=path,
                            hint=_REWRITE) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno,
                            hint=_REWRITE) from exc
    if not isinstance(data, dict) or data.get("type") != RESULT_TYPE:
        raise CassetteError(f"not a hermes-replay result (no \"type\": \"{RESULT_TYPE}\")",
                            path=path, hint="pass a cassette (.jsonl) or a result.json "
                            "written by write_run_result")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > RESULT_SCHEMA:
        raise CassetteError(f"result schema {version!r} is not one this hermes-replay reads "
                            f"(schema {RESULT_SCHEMA})", path=path,
                            hint="upgrade hermes-replay, or " + _REWRITE)
    try:
        return run_result_from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise CassetteError(f"bad replay result: {exc}", path=path, hint=_REWRITE) from exc


def run_result_from_output_dir(folder: str | Path) -> RunResult | None:
    """What an ``evaluate`` output folder holds (no result.json needed): metrics.json and
    samples.jsonl, where the rollout id and reward of each eval sample are written.
    None if ``folder`` (or ``folder/evals``) holds no metrics.json."""
    folder = Path(folder)
    for base in (folder, folder / "evals"):
        metrics_file = base / "metrics.json"
        if not metrics_file.is_file():
            continue
        try:
            data = json.loads(metrics_file.read_text(encoding="utf-8"))
            metrics = dict((data.get("results") or {}).get("all") or {})
            rollouts = []
            samples = base / "samples.jsonl"
            lines = samples.read_text(encoding="utf-8").splitlines() if samples.is_file() else []
            for line in lines:
                sample = json.loads(line) if line.strip() else None
                if isinstance(sample, dict) and sample.get("rollout_id"):
                    rollouts.append(RolloutOutcome(
                        id=str(sample["rollout_id"]), phase="eval",
                        reward=_number(sample.get("reward")), turns=sample.get("turns_used")))
        except (OSError, ValueError, AttributeError) as exc:
            raise CassetteError(f"cannot read the evaluate output: {exc}", path=metrics_file,
                                hint="re-run the replay, or compare the cassette") from exc
        return RunResult(rollouts=rollouts, eval_metrics=metrics)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
