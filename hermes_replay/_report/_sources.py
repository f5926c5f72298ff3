"""What a report is made of: the runs found at a path, and how two sides pair up.

A *run* is one environment command's rollouts: a cassette (a recording), or a replay result
(``result.json``, written per cassette by ``hermes-replay replay``) together with the cassette
it replayed (for the transcripts) and the ``groups.jsonl`` its ``process`` run wrote (for the
training tokens). A *section* of the report is a run compared with a baseline run, or alone.

Inputs, by what the path is:

- a cassette file (``.jsonl``, ``.partial``) — one recording;
- a ``result.json`` — one replay; its baseline is the recording it replayed;
- a folder — every cassette and every ``result.json`` under it (a folder of cassettes, a
  replay output folder), or an ``evaluate`` output folder (``metrics.json``).

Everything is read through the readers ``ls``/``show``/``diff`` use, and nothing found is
executed: a report reads data only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_replay._cassette import Cassette, RolloutRecord, load_cassette
from hermes_replay._errors import CassetteError
from hermes_replay._runner.plan import find_cassettes, flag_value
from hermes_replay._runner.result import RolloutOutcome, RunResult, is_group_record
from hermes_replay._runner.result_io import RESULT_FILE, load_run_result, run_result_from_output_dir

__all__ = ["Run", "Section", "load_runs", "pair_runs", "run_from_cassette", "run_from_result"]

_MODES = ("process", "evaluate", "serve")


@dataclass
class Run:
    """One side of a section: outcomes per rollout, and what else the input holds."""

    label: str
    kind: str  # "cassette" | "result"
    env: str | None
    mode: str
    rollouts: dict[str, RolloutOutcome]
    groups_of: dict[str, str] = field(default_factory=dict)  # rollout -> group id
    records: dict[str, RolloutRecord] = field(default_factory=dict)  # transcripts
    cassette: Cassette | None = None
    misses: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    wandb: dict[str, Any] = field(default_factory=dict)
    eval_metrics: dict[str, Any] = field(default_factory=dict)
    scored_groups: list[dict[str, Any]] = field(default_factory=list)  # groups.jsonl lines
    recorded_rewards: dict[str, float | None] = field(default_factory=dict)
    complete: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.env or "?", self.mode)


@dataclass
class Section:
    """A run and the baseline it is compared with (None: shown alone)."""

    run: Run
    baseline: Run | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        env, mode = self.run.key
        return f"{env} · {mode}"


# --------------------------------------------------------------------------- one run


def _mode_of(command: list[str] | None, fallback: str) -> str:
    if command and command[0] in _MODES:
        return command[0]
    return fallback


def _group_of(rid: str, outcome: dict[str, Any]) -> str:
    """The GRPO group: recorded in the outcome, else the item hash of the rollout id
    (``train-<item>-<occurrence>-<slot>``)."""
    group = outcome.get("group")
    if isinstance(group, str) and group:
        return group
    parts = rid.split("-")
    return "-".join(parts[1:-1]) if len(parts) >= 4 else rid


def _records(cassette: Cassette) -> dict[str, RolloutRecord]:
    """Transcripts per rollout; a plain env's rollout of an ``n > 1`` group has no requests
    of its own and is shown through its group's (``outcome.traffic``), narrowed to its own
    sample of the reply (``outcome.choice``, see ``_cassette.choices``)."""
    records = dict(cassette.rollouts)
    for rid, rec in cassette.rollouts.items():
        shared = records.get(str((rec.outcome or {}).get("traffic") or ""))
        if not rec.interactions and shared is not None and shared is not rec:
            records[rid] = RolloutRecord(rid, shared_interactions(rec, shared),
                                         dict(rec.outcome), list(rec.tool_calls))
    return records


def shared_interactions(rec: RolloutRecord, group: RolloutRecord) -> list[Any]:
    """``group``'s requests as ``rec`` (one of its rollouts) saw them: its own sample."""
    from hermes_replay._cassette.choices import own_part

    own = own_part(list(group.interactions), rec.outcome or {})
    return own if own is not None else list(group.interactions)


def run_from_cassette(cassette: Cassette, label: str | None = None) -> Run:
    h = cassette.header
    rollouts, groups = {}, {}
    for rid, rec in cassette.rollouts.items():
        outcome = rec.outcome or {}
        if is_group_record(outcome):  # a plain env's group: its rollouts are the rows
            continue
        rollouts[rid] = RolloutOutcome.from_outcome(rid, outcome)
        groups[rid] = _group_of(rid, outcome)
    env = h.env_name or (Path(h.env_file).stem if h.env_file else None)
    return Run(label=label or str(cassette.path), kind="cassette", env=env,
               mode=_mode_of(list(h.command or []), cassette.path.stem), rollouts=rollouts,
               groups_of=groups, records=_records(cassette), cassette=cassette,
               complete=cassette.complete)


def _read_groups(path: Path) -> list[dict[str, Any]]:
    """The scored groups a ``process`` run wrote (tokens, masks, logprobs, messages)."""
    groups = []
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as exc:
                    raise CassetteError(f"not valid JSON ({exc})", path=path, line=number,
                                        hint="re-run the replay to write it again") from exc
                if isinstance(value, dict):
                    groups.append(value)
    except OSError as exc:
        raise CassetteError(f"cannot read the scored groups: {exc}", path=path,
                            hint="re-run the replay to write it again") from exc
    return groups


def _groups_file(result: RunResult, folder: Path) -> Path | None:
    named = flag_value(result.command, "--env.data_path_to_save_groups")
    for candidate in ([Path(named)] if named else []) + [folder / "groups.jsonl"]:
        if candidate.is_file():
            return candidate
    return None


def run_from_result(result: RunResult, label: str, folder: Path | None = None) -> Run:
    """A replay result; transcripts come from the cassette it replayed, when it is there."""
    cassette: Cassette | None = None
    if result.cassette is not None and Path(result.cassette).is_file():
        cassette = load_cassette(result.cassette)
    env = result.env_name
    if env is None and cassette is not None:
        h = cassette.header
        env = h.env_name or (Path(h.env_file).stem if h.env_file else None)
    outcomes = {rid: rec.outcome or {} for rid, rec in (cassette.rollouts.items()
                                                         if cassette else [])}
    rollouts = {r.id: r for r in result.rollouts}
    fallback = cassette.path.stem if cassette else (folder.name if folder else "run")
    command = list(result.command) or (list(cassette.header.command) if cassette else [])
    groups_path = _groups_file(result, folder) if folder is not None else None
    return Run(
        label=label, kind="result", env=env, mode=_mode_of(command, fallback),
        rollouts=rollouts,
        groups_of={rid: _group_of(rid, outcomes.get(rid, {})) for rid in rollouts},
        records=_records(cassette) if cassette else {}, cassette=cassette,
        misses=list(result.misses), unused=list(result.unused), wandb=dict(result.wandb),
        eval_metrics=dict(result.eval_metrics),
        scored_groups=_read_groups(groups_path) if groups_path else
        [g for g in result.groups if isinstance(g, dict) and g.get("tokens")],
        recorded_rewards=dict(result.recorded_rewards),
    )


def load_runs(path: str | Path) -> list[Run]:
    """Every run at ``path``; raises ``CassetteError`` naming the path when there is none."""
    path = Path(path)
    if not path.exists():
        raise CassetteError("no such file or folder", path=path,
                            hint="pass a cassette, a folder of cassettes, a replay output "
                            "folder or a result.json")
    if path.is_file():
        if path.name == RESULT_FILE or path.suffix == ".json":
            return [run_from_result(load_run_result(path), str(path), path.parent)]
        return [run_from_cassette(load_cassette(path), str(path))]
    runs: list[Run] = []
    results = sorted(p for p in path.rglob(RESULT_FILE)
                     if not any(part.startswith(".") for part in p.relative_to(path).parts))
    for result_file in results:
        runs.append(run_from_result(load_run_result(result_file), str(result_file),
                                    result_file.parent))
    if not results:
        evaluated = run_result_from_output_dir(path)
        if evaluated is not None:
            runs.append(run_from_result(evaluated, str(path), path))
    replayed = {str(r.cassette.path.resolve()) for r in runs if r.cassette is not None}
    from hermes_replay._cassette.merge import is_merged_shard

    for cassette_path in find_cassettes(path):
        if is_merged_shard(cassette_path) or str(cassette_path.resolve()) in replayed:
            continue
        runs.append(run_from_cassette(load_cassette(cassette_path), str(cassette_path)))
    if not runs:
        raise CassetteError("no cassette, result.json or evaluate output found here", path=path,
                            hint="record one with `hermes-replay record`, or replay cassettes "
                            "with `hermes-replay replay` and pass its output folder")
    return runs


# --------------------------------------------------------------------------- pairing


def _recording_of(run: Run) -> Run | None:
    """A replay result's own baseline: the recording it replayed."""
    if run.kind != "result":
        return None
    if run.cassette is not None:
        base = run_from_cassette(run.cassette)
        base.label = f"{run.cassette.path} (recorded)"
        return base
    if run.recorded_rewards:
        rollouts = {rid: RolloutOutcome(id=rid, phase=run.rollouts[rid].phase
                                        if rid in run.rollouts else "train", reward=reward)
                    for rid, reward in run.recorded_rewards.items()}
        return Run(label="recorded rewards", kind="cassette", env=run.env, mode=run.mode,
                   rollouts=rollouts, groups_of=dict(run.groups_of))
    return None


def pair_runs(subjects: list[Run], baselines: list[Run] | None) -> list[Section]:
    """Sections: with ``baselines`` (``--against``), runs pair by (env, mode) — or one with one
    whatever their names; without, a replay result pairs with the recording it replayed."""
    if baselines is None:
        return [Section(run, _recording_of(run)) for run in subjects]
    if len(subjects) == 1 and len(baselines) == 1:
        section = Section(subjects[0], baselines[0])
        if subjects[0].key != baselines[0].key:
            section.notes.append(f"comparing {' · '.join(subjects[0].key)} with "
                                 f"{' · '.join(baselines[0].key)}")
        return [section]
    by_key: dict[tuple[str, str], Run] = {}
    for base in baselines:
        by_key.setdefault(base.key, base)
    sections = []
    for run in subjects:
        base = by_key.pop(run.key, None)
        section = Section(run, base)
        if base is None:
            section.notes.append("no run of this environment and mode on the --against side")
        sections.append(section)
    for base in by_key.values():  # only on the baseline side: shown so nothing is hidden
        sections.append(Section(base, None, [f"only on the --against side ({base.label})"]))
    return sections
