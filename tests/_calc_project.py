"""A user project with ``calc_tool_env`` and its recorded ``process`` cassette (not a test module).

Recorded once per test session through ``hermes-replay record`` against the scripted endpoint
(so the cassette always matches today's code), then copied into each test's own folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV_REL = "environments/calc_tool_env.py"
CASSETTE_REL = "cassettes/calc_tool_env/process.jsonl"
PROCESS_ARGS = ["process", "--env.total_steps", "2", "--env.group_size", "2",
                "--env.data_path_to_save_groups", "data/groups.jsonl"]


def write_project(root: Path) -> Path:
    (root / "environments").mkdir(parents=True, exist_ok=True)
    for name in ("calc_tool_env.py", "calc_state.py"):
        shutil.copy(HERE / name, root / "environments" / name)
    return root


def record_project(root: Path) -> Path:
    """``root`` with the env and a fresh recording of 2 items x 2 rollouts (4 rollouts)."""
    from environments.tools import registry
    from hermes_replay.cli import main
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    write_project(root)
    saved = Path.cwd()
    tools, cleanups = dict(registry._TOOLS), list(registry._TASK_CLEANUPS)
    os.chdir(root)
    try:
        with ScriptedEndpoint(script="generic", seed=0) as endpoint:
            code = main(["record", ENV_REL, "--endpoint", endpoint.base_url, "--model",
                         "scripted", "--server-type", "openai", "--", *PROCESS_ARGS])
    finally:
        os.chdir(saved)
        # the env registered its tool in the process-wide registry; other tests must not see it
        registry._TOOLS.clear()
        registry._TOOLS.update(tools)
        registry._TASK_CLEANUPS[:] = cleanups
    assert code == 0, "recording the calc env failed"
    return root


def copy_project(recorded: Path, dest: Path, *, trusted: bool = True) -> Path:
    """A copy of the recorded project: the user's own, trusted as after ``hermes-replay
    trust`` (``trusted=False``: a fresh clone nobody trusted yet)."""
    shutil.copytree(recorded, dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("data", "__pycache__"))
    if trusted:
        from hermes_replay._runner.trust import add_trusted

        add_trusted(dest)
    return dest


def _records(cassette: Path) -> list[dict]:
    return [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]


def _write(cassette: Path, records: list[dict]) -> None:
    cassette.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                        encoding="utf-8")


def edit_command(cassette: Path, edit: Callable[[list[str]], list[str]]) -> None:
    """Rewrite the recorded command in the cassette header (what a replay re-runs)."""
    records = _records(cassette)
    records[0]["command"] = edit(list(records[0]["command"]))
    _write(cassette, records)


def add_rollout_the_run_skips(cassette: Path) -> str:
    """Copy one recorded rollout under a group slot the recorded command never fills (slot 2
    of a group of 2): the cassette then holds a rollout the run leaves out. Returns its id."""
    records = _records(cassette)
    source = next(r["rollout"] for r in records if r.get("type") == "interaction")
    new = source.rsplit("-", 1)[0] + "-2"
    copies = [{**r, "rollout": new} for r in records if r.get("rollout") == source]
    _write(cassette, records + copies)
    return new
