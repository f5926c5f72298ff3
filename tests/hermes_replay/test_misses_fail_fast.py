"""A replay miss ends its request at once — no retries by atroposlib or the SDK — and the run
fails with every miss, numbered by turn from 1 as the agent loop and its log count them."""

from __future__ import annotations

from pathlib import Path

import pytest
from _calc_project import CASSETTE_REL, ENV_REL

import hermes_replay


def _change_one_item(project: Path) -> None:
    env = project / ENV_REL
    text = env.read_text(encoding="utf-8")
    old = 'f"What is {i} + {i + 1}? Use the calculator."'
    assert old in text
    env.write_text(text.replace(old, old + ' + ("!" if i == 1 else "")'), encoding="utf-8")


def test_a_changed_prompt_misses_once_per_rollout_without_retries(
        calc_project: Path, caplog: pytest.LogCaptureFixture) -> None:
    _change_one_item(calc_project)
    events: list[hermes_replay.ReplayEvent] = []
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        hermes_replay.run_cassette(CASSETTE_REL, out_dir="out", on_event=events.append)
    misses = info.value.misses
    # item 1's two rollouts miss at their first turn; atroposlib's 3 x 3 tenacity attempts
    # would have shown each miss 9 times
    assert [e.kind for e in events].count("miss") == len(misses) == 2
    assert {(m.turn, m.seq) for m in misses} == {(1, 0)}
    assert all("What is 1 + 2? Use the calculator.!" in m.diff for m in misses)
    # the other item's rollouts replayed all their turns meanwhile
    assert [e.kind for e in events].count("hit") == 4
    # the agent loop's log line names the same turn as the miss report
    for miss in misses:
        (line,) = [r.getMessage() for r in caplog.records
                   if f"rollout {miss.rollout} task" in r.getMessage()]
        assert " turn 1: replay miss, ending the rollout: " in line
        assert f"rollout {miss.rollout!r}, turn 1: POST /v1/chat/completions" in line
