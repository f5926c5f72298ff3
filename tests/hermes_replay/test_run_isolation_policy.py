"""What ``HERMES_SANDBOX`` a run sets for the environment's sandboxes, and that it is undone.

The sandbox side (what ``bwrap`` contains) is proved in tests/environments; here: which policy
replay, record and pass-through runs get, that the user's own setting comes back, and that
overlapping runs in one process never leave isolation switched off or on by accident.
"""

from __future__ import annotations

import os

import pytest

from hermes_replay._session.isolation import ISOLATION_VAR, tool_isolation


@pytest.mark.parametrize(
    ("mode", "trust", "user", "expected"),
    [
        ("replay", False, None, "bwrap"),
        ("replay", False, "none", "bwrap"),  # a cassette's commands: only --trust-cassette opts out
        ("auto", False, "none", "bwrap"),
        ("replay", True, None, "none"),
        ("record", False, None, "bwrap"),  # the live model's commands: isolated too …
        ("record", False, "none", "none"),  # … unless the author opted out for live runs
        ("passthrough", False, "auto", "bwrap"),
        ("record", True, None, "none"),
    ],
)
def test_policy_per_mode_and_the_users_value_comes_back(monkeypatch, mode, trust, user,
                                                        expected) -> None:
    if user is None:
        monkeypatch.delenv(ISOLATION_VAR, raising=False)
    else:
        monkeypatch.setenv(ISOLATION_VAR, user)
    with tool_isolation(mode, trust) as policy:
        assert policy == expected and os.environ[ISOLATION_VAR] == expected
    assert os.environ.get(ISOLATION_VAR) == user


def test_overlapping_runs_keep_isolation_while_any_requires_it(monkeypatch) -> None:
    monkeypatch.delenv(ISOLATION_VAR, raising=False)
    trusted = tool_isolation("replay", trust_cassette=True)
    strict = tool_isolation("replay")
    trusted.__enter__()
    assert os.environ[ISOLATION_VAR] == "none"
    strict.__enter__()
    assert os.environ[ISOLATION_VAR] == "bwrap"
    trusted.__exit__(None, None, None)  # the trusting run ends first: still isolated
    assert os.environ[ISOLATION_VAR] == "bwrap"
    strict.__exit__(None, None, None)
    assert ISOLATION_VAR not in os.environ


def test_a_bare_cassette_block_isolates_the_tools_it_executes(tmp_path, monkeypatch) -> None:
    """No run_cassette around it: each executed tool call still gets the replay policy."""
    import hermes_replay

    monkeypatch.setenv(ISOLATION_VAR, "none")  # the author's opt-out for live runs

    def policy_seen() -> str | None:  # what a sandbox created by this tool would read
        return os.environ.get(ISOLATION_VAR)

    path = tmp_path / "c.jsonl"
    with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r"):
        assert hermes_replay.tool_call("probe", {}, policy_seen) == "none"  # opt-out honoured
    with hermes_replay.cassette(path, "replay", tools="execute"), hermes_replay.rollout("r"):
        assert hermes_replay.tool_call("probe", {}, policy_seen) == "bwrap"  # a cassette's call
    assert os.environ[ISOLATION_VAR] == "none"
    with tool_isolation("replay", trust_cassette=True), \
            hermes_replay.cassette(path, "replay", tools="execute"), hermes_replay.rollout("r"):
        assert hermes_replay.tool_call("probe", {}, policy_seen) == "none"  # the run trusts it
