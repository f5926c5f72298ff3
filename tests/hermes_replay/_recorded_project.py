"""The two fixtures of a test module that works on a project recorded once: ``recorded`` (the
project, recorded once per module with the scripted endpoint) and ``project`` (a fresh copy of
it per test, trusted, as the working directory), for any ``make_project``/``record`` pair."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hermes_replay.cli import main


def recorded_project_fixtures(make_project: Callable[[Path], Path],
                              record: Callable[[], int]) -> tuple[Any, Any]:
    """``recorded, project = recorded_project_fixtures(make_project, record)`` at module level."""

    @pytest.fixture(scope="module")
    def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
        root = make_project(tmp_path_factory.mktemp("recorded"))
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(root)
            assert record() == 0
        return root

    @pytest.fixture
    def project(recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        root = tmp_path / "proj"
        shutil.copytree(recorded, root, symlinks=True)
        monkeypatch.chdir(root)
        main(["trust", str(root)])  # a copy at a new path: trusted as the user's own
        return root

    return recorded, project
