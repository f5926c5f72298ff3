"""The set-up of every test module that runs commands under real bubblewrap."""

from __future__ import annotations

from typing import Any

import pytest

from environments.tools.sandbox import _bwrap


def bwrap_required_fixture() -> Any:
    """``_isolation_required = bwrap_required_fixture()`` at module level: each test of the
    module runs isolated, and a bwrap that does not work here is a failure, never a skip
    (``.ci/run`` and ``scripts/test`` install it)."""

    @pytest.fixture(autouse=True)
    def _isolation_required(monkeypatch: pytest.MonkeyPatch) -> None:
        problem = _bwrap.bwrap_problem()
        assert problem is None, (
            f"bubblewrap must work for these tests (.ci/run installs it): {problem}")
        monkeypatch.setenv("HERMES_SANDBOX", "bwrap")

    return _isolation_required
