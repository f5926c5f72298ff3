"""``WorldCalls._rerun``: a recorded tool call answered from the cassette and then run again to
rebuild a world (``record --missing-only``'s rebuilt rollouts, a fork's prefix) — its drift
report, what is written, and what a fork keeps (issue 48 asked for this test)."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_replay._cassette.toolcalls import ToolCall, exit_code_of
from hermes_replay._session.forking import ForkPoint
from hermes_replay._session.tools import ToolLedger


def _served(result: str) -> ToolCall:
    return ToolCall(rollout="r", seq=3, turn=1, source="agent", name="terminal",
                    arguments={"command": "date +%s%N"}, result=result,
                    exit_code=exit_code_of(result))  # as recording makes it


def _ledger(tmp_path: Path, **kw) -> tuple[ToolLedger, ToolCall]:
    ledger = ToolLedger(tmp_path / "c.jsonl", "auto", **kw)
    served = _served('{"output": "1700000000123456789\\n", "exit_code": 0}')
    ledger.hits.append((3, served))
    return ledger, served


def test_a_result_that_differs_is_drift_naming_the_call_with_both_sides(tmp_path: Path) -> None:
    ledger, served = _ledger(tmp_path)
    ledger._rerun("r", lambda: '{"output": "1700000000987654321\\n", "exit_code": 0}', served)
    assert ledger.executed == 1
    [drift] = ledger.drift
    assert (drift.rollout, drift.seq, drift.name) == ("r", 3, "terminal")
    assert "differs from the recorded one" in drift.reason
    assert "recorded" in drift.diff and "run again" in drift.diff
    assert "123456789" in drift.diff and "987654321" in drift.diff
    assert "tool call 3 (terminal)" in drift.describe()
    # auto writes what the world now holds: the new result, marked as a re-run
    assert ledger.hits == []
    [again] = ledger.new
    assert again.origin == "rerun" and "987654321" in again.result and again.seq == 3


def test_the_same_result_is_no_drift(tmp_path: Path) -> None:
    ledger, served = _ledger(tmp_path)
    ledger._rerun("r", lambda: served.result, served)
    assert ledger.drift == [] and ledger.executed == 1
    assert [c.origin for c in ledger.new] == ["rerun"]


def test_the_sessions_normalizers_apply_before_comparing(tmp_path: Path) -> None:
    def digits(value):
        return re.sub(r"\d{10,}", "<n>", value) if isinstance(value, str) else (
            {k: digits(v) for k, v in value.items()} if isinstance(value, dict) else value)

    ledger, served = _ledger(tmp_path, normalize=digits)
    ledger._rerun("r", lambda: '{"output": "1700000000987654321\\n", "exit_code": 0}', served)
    assert ledger.drift == []


def test_a_fork_keeps_what_its_env_was_given_and_lists_the_drift(tmp_path: Path) -> None:
    ledger, served = _ledger(tmp_path)
    ledger.fork = ForkPoint("r", 4)
    ledger._rerun("r", lambda: '{"output": "1700000000987654321\\n", "exit_code": 0}', served)
    assert ledger.hits == [(3, served)] and ledger.new == []  # the branch replays as served
    [drift] = ledger.drift
    assert drift.seq == 3 and "987654321" in drift.diff
