"""The accepted baseline a replay's rewards are compared with: a change accepted is not new.

A cassette's recorded rewards are what the env gave when it was recorded. Once a reward
change is accepted (``pytest --snapshot-update`` writes the project's reward snapshot), the
recording is no longer the reference: comparing with it would print CHANGED for the same
rollouts on every replay, and a new change could not be told from accepted ones. So:

* the baseline is the project's reward snapshot of this cassette where one exists — a
  ``__snapshots__/**/*.rollouts.txt`` under the project root whose ``env:`` line names the
  cassette's env and whose rollout ids are all recorded in the cassette (a snapshot holds ids
  and numbers, not the cassette's path; content-addressed ids make the match exact);
* else the recording. Several snapshots that disagree about a rollout are not guessed
  between: the recording is the baseline, and the row says why.

The snapshot keeps four decimals: a reward within half a unit of the last one is the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Baseline", "find_baseline", "snapshot_files"]

_SKIP_DIRS = {"node_modules", "site-packages", "__pycache__"}
_MAX_ENTRIES = 50_000  # a project's walk is bounded (a data folder of millions is not read)
_SNAPSHOT_SUFFIX = ".rollouts.txt"
TOLERANCE = 5e-5  # half the last decimal the snapshot keeps


@dataclass
class Baseline:
    """Rewards to compare a replay with, and where they come from (for the row to say)."""

    rewards: dict[str, float | None]
    source: str  # "the recording" or "snapshot <path>"
    path: Path | None = None  # the snapshot file, when it is one
    note: str | None = None  # why the recording is used though snapshots exist
    others: list[Path] = field(default_factory=list)  # further snapshots that agree

    @property
    def is_snapshot(self) -> bool:
        return self.path is not None


def snapshot_files(root: Path) -> list[Path]:
    """Reward snapshot files under ``root`` (hidden folders, venvs and caches skipped)."""
    found: list[Path] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                   and not (Path(folder, d) / "pyvenv.cfg").exists()]
        seen += len(dirs) + len(files)
        if Path(folder).name == "__snapshots__" or "__snapshots__" in Path(folder).parts:
            found += [Path(folder, f) for f in files if f.endswith(_SNAPSHOT_SUFFIX)]
        if seen > _MAX_ENTRIES:
            break
    return sorted(found)


def _parse(path: Path) -> tuple[str | None, dict[str, float | None]] | None:
    from hermes_replay._runner.snapshot_text import FORMAT_LINE, snapshot_table

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith(FORMAT_LINE):
        return None
    env = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.startswith("env:")), None)
    rewards: dict[str, float | None] = {}
    for rid, cols in snapshot_table(text)[0].items():
        try:
            rewards[rid] = float(cols[0]) if cols and cols[0] != "-" else None
        except ValueError:
            rewards[rid] = None
    return env, rewards


def find_baseline(root: Path | None, env_name: str | None, recorded: dict[str, float | None],
                  files: Iterable[Path] | None = None) -> Baseline:
    """The baseline for a cassette of env ``env_name`` whose recorded rewards are
    ``recorded``: its project's snapshot (under ``root``), else the recording."""
    recording = Baseline(dict(recorded), "the recording")
    if root is None or not recorded:
        return recording
    matches: list[tuple[Path, dict[str, float | None]]] = []
    for path in files if files is not None else snapshot_files(root):
        parsed = _parse(path)
        if parsed is None:
            continue
        env, rewards = parsed
        if rewards and (env_name is None or env == env_name) and set(rewards) <= set(recorded):
            matches.append((path, rewards))
    if not matches:
        return recording
    merged: dict[str, float | None] = {}
    for _path, rewards in matches:
        for rid, value in rewards.items():
            if rid in merged and not _same(merged[rid], value):
                names = ", ".join(_shown(p, root) for p, _ in matches[:3])
                recording.note = (f"snapshots {names} disagree about {rid}; compared with the "
                                  "recording")
                return recording
            merged[rid] = value
    path = matches[0][0]
    return Baseline({**recorded, **merged}, f"snapshot {_shown(path, root)}", path=path,
                    others=[p for p, _ in matches[1:]])


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOLERANCE


def changes(baseline: Baseline, replayed: dict[str, float | None]
            ) -> dict[str, tuple[float | None, float | None]]:
    """Rollouts whose replayed reward differs from the baseline's."""
    return {rid: (baseline.rewards[rid], new) for rid, new in replayed.items()
            if rid in baseline.rewards and not _same(baseline.rewards[rid], new)}


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
