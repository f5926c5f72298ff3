"""A user project with ``calc_tool_env`` and its recorded ``process`` cassette (not a test module).

Recorded once per test session through ``hermes-replay record`` against the scripted endpoint
(so the cassette always matches today's code), then copied into each test's own folder.
"""

from __future__ import annotations

import os
import shutil
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


def copy_project(recorded: Path, dest: Path) -> Path:
    shutil.copytree(recorded, dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("data", "__pycache__"))
    return dest
