"""Count (or forbid) sandbox creations during a replay: the proof that replay executes nothing
a cassette says unless asked (``tests/test_shipped_cassettes.py``,
``tests/test_replay_executes_nothing.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from environments.tools.sandbox import base as sandbox_base


class SandboxCreations:
    """Counts sandbox creations; with ``fail=True`` every creation raises instead."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, fail: bool) -> None:
        self.count = 0
        original = sandbox_base.SandboxBackend.create.__func__  # type: ignore[attr-defined]

        def create(cls: type, task_id: str) -> Any:
            self.count += 1
            if fail:
                raise AssertionError(f"replay created a {cls.__name__} for task {task_id}")
            return original(cls, task_id)

        for cls in [sandbox_base.SandboxBackend, *sandbox_base._BACKENDS.values()]:
            if "create" in vars(cls) or cls is sandbox_base.SandboxBackend:
                monkeypatch.setattr(cls, "create", classmethod(create))
