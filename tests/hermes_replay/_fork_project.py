"""A user's project holding ``tests/world/steps_env.py`` (a six-turn Hermes env whose reward
reads ``d.txt`` in the agent's sandbox), recorded against the scripted endpoint, for the fork
tests (issue 48).

Also the tests' independent oracles: what a rollout's files and reward must be, recomputed
from its own recorded agent commands with the env's rule — never read off the output checked."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

WORLD = Path(__file__).resolve().parents[1] / "world"
SCRIPT = str(WORLD / "steps_script.toml")
ENV_REL = "environments/steps_env.py"
CASSETTE_REL = "cassettes/steps_env/process.jsonl"
ARGS = ["process", "--env.total_steps", "1", "--env.group_size", "2",
        "--env.data_path_to_save_groups", "data/groups.jsonl"]
SCORES = {"four": 1.0, "FOUR": 0.5, "4": 0.25}  # the env's rule, written again
_ECHO = re.compile(r"echo (\S+) > (\w)\.txt")


def make_project(root: Path, task: str = "steps") -> Path:
    (root / "environments").mkdir(parents=True)
    text = (WORLD / "steps_env.py").read_text()
    (root / ENV_REL).write_text(text.replace('TASK = "steps"', f'TASK = "{task}"'))
    (root / "pyproject.toml").write_text("")
    return root


def record(seed: int = 0) -> int:
    with ScriptedEndpoint(script=SCRIPT, seed=seed) as ep:
        return main(["record", ENV_REL, "--endpoint", ep.base_url, "--model", "m",
                     "--server-type", "openai", "--", *ARGS])


def rollouts(path: str | Path = CASSETTE_REL) -> dict[str, Any]:
    return load_cassette(path).rollouts


def files_written(record: Any, before_turn: int | None = None) -> dict[str, str]:
    """The files a rollout's own recorded agent commands wrote (name → content), from the
    commands alone; ``before_turn``: only those of turns before it (1-based)."""
    out: dict[str, str] = {}
    for call in sorted(record.tool_calls, key=lambda c: c.seq):
        if call.source != "agent" or (before_turn is not None and call.turn >= before_turn - 1):
            continue
        for value, name in _ECHO.findall(call.arguments["command"]):
            out[f"{name}.txt"] = value + "\n"
    return out


def expected_reward(record: Any) -> float:
    """The env's rule on what the rollout's own commands left in d.txt."""
    return SCORES.get(files_written(record).get("d.txt", "").strip(), 0.0)


def workspace_files(record: Any, cassette: str | Path) -> dict[str, bytes]:
    """The rollout's recorded workspace (path → content), read back from the store."""
    from hermes_replay._world.rescore import load_workspace
    from hermes_replay._world.store import store_for

    store = store_for(cassette)
    ws = load_workspace(record.outcome["workspace"], store)
    return {f["path"]: store.get(f["sha256"], 1 << 24) for f in ws.files}


def copy_project(recorded: Path, root: Path) -> Path:
    shutil.copytree(recorded, root, symlinks=True)
    return root
