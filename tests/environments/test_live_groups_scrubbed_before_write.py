"""In live harness runs a scored group's messages are scrubbed before atroposlib writes them."""

from __future__ import annotations

import copy

import hermes_replay
from environments._live_groups import scrub_live_groups
from hermes_replay._secrets.known import KNOWN

KEY = "sk-proj-" + "Qz7" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuV"
PLAIN = "Qz7plainValueOnlyKnownByName9876"


def _groups() -> list[dict]:
    messages = [{"role": "user", "content": f"use {KEY} and {PLAIN}"},
                {"role": "assistant", "content": "ok"}]
    return [{"tokens": [[1, 2]], "masks": [[-100, 2]], "scores": [1.0],
             "messages": [messages]}, None]


def test_live_modes_scrub_messages_and_leave_tokens(tmp_path):
    with KNOWN.scope():
        KNOWN.add(PLAIN)
        for mode in ("record", "passthrough"):
            groups = _groups()
            with hermes_replay.cassette(tmp_path / f"{mode}.jsonl", mode=mode):
                scrub_live_groups(groups)
            text = repr(groups[0]["messages"])
            assert KEY not in text and PLAIN not in text, mode
            assert "use " in text and "'ok'" in text
            assert groups[0]["tokens"] == [[1, 2]] and groups[1] is None


def test_replay_and_runs_outside_the_harness_are_left_as_they_are(tmp_path):
    groups = _groups()
    scrub_live_groups(groups)
    assert groups == _groups()
    cassette = tmp_path / "c.jsonl"
    with hermes_replay.cassette(cassette, mode="record"):
        pass
    replayed = copy.deepcopy(_groups())
    with hermes_replay.cassette(cassette, mode="replay"):
        scrub_live_groups(replayed)
    assert replayed == _groups()
