"""A wall clock the test sets: ``datetime.datetime.now()`` as environments read it, moved by
``advance`` instead of a sleep (not a test module)."""

from __future__ import annotations

import datetime as real_datetime

import pytest

START = real_datetime.datetime(2026, 12, 2, 22, 14, 30)


class Clock:
    """Patches ``datetime.datetime`` (the attribute environments reach through ``import
    datetime``) with a subclass whose ``now()`` is this clock; monkeypatch restores it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = START
        clock = self

        class ControlledDatetime(real_datetime.datetime):
            @classmethod
            def now(cls, tz=None):  # type: ignore[override]
                return clock.now

        monkeypatch.setattr(real_datetime, "datetime", ControlledDatetime)

    def advance(self, **delta: float) -> None:
        self.now = self.now + real_datetime.timedelta(**delta)
