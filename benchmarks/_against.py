"""``--against DIR``: time an earlier revision side by side with this tree, in one run.

DIR is a checkout of that revision (``git worktree add --detach ../base REV``), run with this
virtual environment: DIR goes first on ``PYTHONPATH``, so the CLI, its ``-j`` workers (the fork
server takes the parent's ``sys.path``) and a local Ray cluster's actors (started with the
driver's environment) import DIR's code. The runs alternate between the two trees, so load
from other processes falls on both; the ratio of medians is the result.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["check_against", "code_env"]


def check_against(folder: str | None) -> Path | None:
    if folder is None:
        return None
    path = Path(folder).resolve()
    if not (path / "hermes_replay" / "__init__.py").is_file():
        raise SystemExit(f"--against {folder}: not a checkout of hermes-replay (no "
                         "hermes_replay/__init__.py there)")
    return path


def code_env(against: Path | None) -> dict[str, str]:
    """The environment of a timed run of this tree (None) or of the checkout ``against``."""
    env = dict(os.environ)
    if against is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(against), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env
