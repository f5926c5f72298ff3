"""The public surface of ``hermes_replay`` is deliberate: a change to it must show up here."""

from __future__ import annotations

import hermes_replay


def test_all_is_sorted_and_exactly_the_public_names() -> None:
    assert hermes_replay.__all__ == sorted(hermes_replay.__all__)
    assert set(hermes_replay.__all__) == {
        "Cassette", "CassetteError", "CassetteMiss", "CassetteResult", "CorpusError",
        "CorpusObserver", "CorpusResult", "ForkError", "ForkResult", "HermesReplayError",
        "RecordingFailed",
        "ReplayEvent", "ReplayFailed", "ReplaySummary", "RequestNotRecorded", "RolloutOutcome",
        "RolloutScope", "RunOptions", "RunResult", "Session", "TokenizerMismatch", "ToolCallMiss",
        "ToolCallsDrifted", "UnusedRecordings", "__version__", "active_mode", "annotate",
        "bundled_tokenizer_path", "cassette", "check_tokenizer", "current_rollout",
        "describe_tokenizer", "fork_rollout", "load_cassette", "offer_known_good",
        "recorded_endpoint",
        "replay_corpus", "reward_parts", "rollout", "rollout_label", "run_cassette", "scoring",
        "scrub",
        "tokenizer_for_run", "tool_call", "write_report",
    }
    for name in hermes_replay.__all__:
        assert getattr(hermes_replay, name) is not None


def test_exception_tree() -> None:
    assert issubclass(hermes_replay.CassetteError, hermes_replay.HermesReplayError)
    assert issubclass(hermes_replay.CassetteMiss, hermes_replay.HermesReplayError)
    assert issubclass(hermes_replay.UnusedRecordings, hermes_replay.CassetteMiss)
    assert issubclass(hermes_replay.RecordingFailed, hermes_replay.HermesReplayError)
    assert issubclass(hermes_replay.CorpusError, hermes_replay.HermesReplayError)
    assert issubclass(hermes_replay.TokenizerMismatch, hermes_replay.CassetteError)
    assert not issubclass(hermes_replay.CassetteMiss, hermes_replay.CassetteError)
    assert issubclass(hermes_replay.ToolCallMiss, hermes_replay.RequestNotRecorded)
    assert issubclass(hermes_replay.ToolCallsDrifted, hermes_replay.HermesReplayError)
    assert issubclass(hermes_replay.ForkError, hermes_replay.HermesReplayError)


def test_importing_patches_nothing() -> None:
    import httpx

    from hermes_replay._session import intercept as _intercept

    assert _intercept.installed() == ()
    assert not getattr(httpx.HTTPTransport.handle_request, "__hermes_replay_patch__", False)
