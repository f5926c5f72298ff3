"""``check``'s rerun diagnosis names the differing field before it guesses a cause: the clock
in a prompt (the second run of two in one process misses a minute later) is a normalizer to
keep, not "per-run state on the environment instance"."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_replay._check._rerun import RERUN_FIX, diagnose


def _trace(path: Path, content: str, reward: float | None) -> None:
    entries = [{"kind": "request", "rollout": "train-a-0-0", "seq": 0, "turn": 0,
                "request": {"method": "POST", "path": "/v1/chat/completions", "query": [],
                            "body": {"messages": [{"role": "system", "content": content}]}}}]
    if reward is not None:
        entries.append({"kind": "outcome", "rollout": "train-a-0-0", "reward": reward})
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_a_clock_in_the_prompt_is_named_with_its_normalizer(tmp_path: Path) -> None:
    _trace(tmp_path / "trace-1.jsonl", "Today is 2026-12-02 22:14.", 1.0)
    _trace(tmp_path / "trace-2.jsonl", "Today is 2026-12-02 22:15.", None)
    runs = [{"rewards": {"train-a-0-0": 1.0}, "error": None},
            {"rewards": {}, "error": "CassetteMiss: 1 request(s) had no matching recording"}]
    problems, fix = diagnose(runs, tmp_path)
    (severity, message), = problems
    assert severity == "fail"
    assert message.startswith("the second run differs first at request · rollout train-a-0-0 "
                              "· turn 1 · field body.messages[0].content: 'Today is "
                              "2026-12-02 22:14.' then 'Today is 2026-12-02 22:15.'")
    assert "a second run in the same process failed" in message  # what happened, after
    assert fix is not None and fix != RERUN_FIX and "per-run state" not in fix
    assert "hermes-replay normalize CASSETTE --add datetime" in fix


def test_state_that_changes_only_rewards_still_gets_the_state_fix(tmp_path: Path) -> None:
    _trace(tmp_path / "trace-1.jsonl", "What is 2+2?", 1.0)
    _trace(tmp_path / "trace-2.jsonl", "What is 2+2?", 0.75)
    runs = [{"rewards": {"train-a-0-0": 1.0}, "error": None},
            {"rewards": {"train-a-0-0": 0.75}, "error": None}]
    problems, fix = diagnose(runs, tmp_path)
    assert problems and "state leaks between runs" in problems[0][1]
    assert fix == RERUN_FIX
