"""A replay decodes each recording's line on first use (``_cassette.deferred``), and a damaged
line still fails the replay naming file:line: at the request it would answer, or at the end
of the replay when the run never reached it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reliability_helpers import record_sample, run_rollouts

import hermes_replay
from hermes_replay._cassette import load_cassette
from hermes_replay._cassette.deferred import DeferredInteraction, read_deferred
from hermes_replay._cassette.matching import Matcher

BASE = "http://127.0.0.1:9/v1"  # never reached: a replay answers from the cassette


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    path = tmp_path_factory.mktemp("deferred") / "sample.jsonl"
    record_sample(path, rollouts=2, turns=3)
    base = load_cassette(path).interactions[0].request["url"].rsplit("/chat", 1)[0]
    return path.read_text(encoding="utf-8").splitlines(), base


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _line(lines: list[str], rollout: str, seq: int) -> int:
    """The 0-based index of the interaction line of (rollout, seq)."""
    return next(i for i, text in enumerate(lines)
                if text.startswith('{"type": "interaction", ')
                and json.loads(text)["rollout"] == rollout and json.loads(text)["seq"] == seq)


def _signature() -> str:
    return Matcher.build().signature()


def test_reads_what_load_cassette_reads(sample: tuple[list[str], str], tmp_path: Path) -> None:
    path = _write(tmp_path, sample[0])
    eager = load_cassette(path)
    reader = read_deferred(path, _signature())
    assert reader is not None and reader.cassette is not None
    lazy = reader.cassette
    assert len(lazy.interactions) == len(eager.interactions) == 6
    assert all(isinstance(i, DeferredInteraction) and not i.decoded for i in lazy.interactions)
    for mine, theirs in zip(lazy.interactions, eager.interactions, strict=True):
        assert mine.load().model_dump() == theirs.model_dump()
    assert lazy.outcomes == eager.outcomes and lazy.lines == eager.lines
    assert [c.model_dump() for c in lazy.tool_calls] == [c.model_dump() for c in eager.tool_calls]
    assert lazy.header == eager.header


def test_replay_decodes_only_the_turns_it_replays(sample: tuple[list[str], str],
                                                  tmp_path: Path) -> None:
    lines, base = sample
    path = _write(tmp_path, lines)
    with hermes_replay.cassette(path, "replay", strict=False) as session:
        reader = session._deferred
        assert reader is not None
        interactions = reader.cassette.interactions
        assert not any(i.decoded for i in interactions)  # start decoded no body
        run_rollouts(base, rollouts=1, turns=3)  # r0 only
        assert {i.key for i in interactions if i.decoded} == {("r0", 0), ("r0", 1), ("r0", 2)}
    assert all(i.decoded for i in interactions)  # the end of the replay checked the rest


def test_damaged_line_fails_the_request_and_the_replay_naming_it(
        sample: tuple[list[str], str], tmp_path: Path) -> None:
    lines, base = list(sample[0]), sample[1]
    at = _line(lines, "r1", 1)
    assert '"status": 200' in lines[at]
    lines[at] = lines[at].replace('"status": 200', '"status": 2 00')  # the start reads fine
    path = _write(tmp_path, lines)
    session = hermes_replay.cassette(path, "replay")
    session.start()  # the damage is past what the start reads
    with pytest.raises(hermes_replay.RequestNotRecorded) as miss:
        run_rollouts(base, rollouts=2, turns=3)
    assert f"{path}:{at + 1}: not valid JSON" in miss.value.miss.reason
    with pytest.raises(hermes_replay.CassetteError) as info:
        session.stop(miss.value)
    assert info.value.path == path and info.value.line == at + 1
    assert "next step:" in str(info.value)


def test_damaged_line_the_run_never_reached_fails_at_the_end(
        sample: tuple[list[str], str], tmp_path: Path) -> None:
    lines, base = list(sample[0]), sample[1]
    at = _line(lines, "r1", 2)
    lines[at] = lines[at].replace('"status": 200', '"status": [200')
    path = _write(tmp_path, lines)
    with pytest.raises(hermes_replay.CassetteError) as info:
        with hermes_replay.cassette(path, "replay", strict=False):
            run_rollouts(base, rollouts=1, turns=3)  # r0 replays fine
    assert info.value.line == at + 1 and "not valid JSON" in str(info.value)


def test_damaged_blob_is_named_at_its_own_line(sample: tuple[list[str], str],
                                               tmp_path: Path) -> None:
    lines, base = list(sample[0]), sample[1]
    at = next(i for i, text in enumerate(lines) if text.startswith('{"type": "blob", '))
    lines[at] = lines[at][:-1] + ', }'  # a trailing comma: not JSON, same start and end
    path = _write(tmp_path, lines)
    with pytest.raises(hermes_replay.CassetteError) as info:
        with hermes_replay.cassette(path, "replay"):
            run_rollouts(base, rollouts=2, turns=3)
    assert info.value.line == at + 1, str(info.value)


def test_a_field_given_twice_is_refused(sample: tuple[list[str], str], tmp_path: Path) -> None:
    """JSON lets the last copy win; the index read the first: such a line is not used."""
    lines, base = list(sample[0]), sample[1]
    at = _line(lines, "r0", 1)
    lines[at] = lines[at][:-1] + ', "seq": 2}'
    path = _write(tmp_path, lines)
    with pytest.raises(hermes_replay.CassetteError) as info:
        with hermes_replay.cassette(path, "replay"):
            run_rollouts(base, rollouts=2, turns=3)
    assert info.value.line == at + 1 and "given twice" in str(info.value)


def test_lines_in_another_layout_are_read_whole(sample: tuple[list[str], str],
                                                tmp_path: Path) -> None:
    """A hand-edited line (keys reordered) or another matcher's fingerprints: the file is read
    up front as ``load_cassette`` reads it, and replays the same."""
    lines, base = list(sample[0]), sample[1]
    at = _line(lines, "r0", 0)
    lines[at] = json.dumps(json.loads(lines[at]), sort_keys=True)
    path = _write(tmp_path, lines)
    assert read_deferred(path, _signature()) is None
    assert read_deferred(_write(tmp_path, sample[0]), "another matcher") is None
    path = _write(tmp_path, lines)
    with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert session._deferred is None
        run_rollouts(base, rollouts=2, turns=3)


def test_a_cassette_with_its_own_normalizers_is_deferred_too(tmp_path: Path) -> None:
    """The header's normalizers join the replay's matcher: its stored fingerprints are that
    matcher's, so the file need not be read whole."""
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    path = tmp_path / "n.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record", normalizers=["uuid"]):
            run_rollouts(ep.base_url, rollouts=1, turns=2)
        base = ep.base_url
    assert load_cassette(path).header.normalizers == ["uuid"]
    with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert session._deferred is not None
        run_rollouts(base, rollouts=1, turns=2)


def test_an_answered_rollout_lets_its_decoded_bodies_go(sample: tuple[list[str], str],
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once every recording of a rollout has answered, its decoded bodies are let go (they
    made the collector's full passes grow with the cassette); a later use decodes them again,
    alike, and the end of the replay does not decode a line twice."""
    from hermes_replay._cassette.deferred import DeferredReader

    lines, base = sample
    path = _write(tmp_path, lines)
    decoded: list[int] = []
    real = DeferredReader._decode_one

    def counting(self: DeferredReader, inter: DeferredInteraction, ahead: bool = False) -> None:
        if inter._real is None:
            decoded.append(inter.line)
        real(self, inter, ahead)

    monkeypatch.setattr(DeferredReader, "_decode_one", counting)
    eager = {i.key: i.model_dump() for i in load_cassette(path).interactions}
    with hermes_replay.cassette(path, "replay", strict=False) as session:
        interactions = session._deferred.cassette.interactions
        run_rollouts(base, rollouts=1, turns=3)  # r0 only
        r0 = [i for i in interactions if i.rollout == "r0"]
        assert len(r0) == 3 and all(i.decoded and i._real is None for i in r0)
        assert not any(i.decoded for i in interactions if i.rollout == "r1")
        assert sorted(decoded) == sorted(i.line for i in r0)  # each once
    assert sorted(decoded) == sorted(i.line for i in interactions)  # the end: r1, once each
    for inter in r0:  # let go, not lost: a later reader gets the same recording
        assert inter.load().model_dump() == eager[inter.key]


def test_a_replay_keeps_only_the_rollouts_in_flight_decoded(tmp_path: Path) -> None:
    """What a long replay holds decoded does not grow with the rollouts it has answered."""
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    path = tmp_path / "long.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record", header={"env_name": "sample"}):
            run_rollouts(ep.base_url, rollouts=6, turns=2)
        base = ep.base_url
    sessions: list[hermes_replay.Session] = []
    held: list[int] = []  # recordings held decoded, at each answer

    def on_event(event: hermes_replay.ReplayEvent) -> None:
        if event.kind == "hit" and sessions:
            reader = sessions[0]._deferred
            held.append(sum(i._real is not None for i in reader.cassette.interactions))

    with hermes_replay.cassette(path, "replay", strict=True, on_event=on_event) as session:
        sessions.append(session)
        run_rollouts(base, rollouts=6, turns=2)  # one rollout after another
    assert len(held) == 12 and max(held) == 2, held  # the rollout in flight, never more


def test_decoding_ahead_leaves_a_damaged_line_to_its_own_request(
        sample: tuple[list[str], str], tmp_path: Path) -> None:
    """A rollout's lines are decoded together at its first request; a damaged later line does
    not fail the earlier turns, only the request it would answer, naming it."""
    lines, base = list(sample[0]), sample[1]
    at = _line(lines, "r0", 2)
    lines[at] = lines[at].replace('"status": 200', '"status": 2 00')
    path = _write(tmp_path, lines)
    session = hermes_replay.cassette(path, "replay")
    session.start()
    with pytest.raises(hermes_replay.RequestNotRecorded) as miss:
        run_rollouts(base, rollouts=1, turns=3)
    assert session.summary().interactions == 2  # turns 0 and 1 answered
    assert f"{path}:{at + 1}: not valid JSON" in miss.value.miss.reason
    with pytest.raises(hermes_replay.CassetteError) as info:
        session.stop(miss.value)
    assert info.value.line == at + 1


def test_a_damaged_scopeless_line_the_run_never_reached_fails_at_the_end(
        tmp_path: Path) -> None:
    """Requests made outside any rollout are decoded one by one; the end of the replay still
    checks each of them (it once checked only the last)."""
    import openai

    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    path = tmp_path / "scopeless.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key="sk-test-not-real", max_retries=0)
        with hermes_replay.cassette(path, "record", header={"env_name": "sample"}):
            for word in ("one", "two", "three"):
                client.chat.completions.create(model="m", messages=[
                    {"role": "user", "content": f"say {word}"}])
    lines = path.read_text(encoding="utf-8").splitlines()
    scopeless = [i for i, text in enumerate(lines)
                 if text.startswith('{"type": "interaction", "rollout": null, ')]
    assert len(scopeless) == 3
    at = scopeless[1]
    lines[at] = lines[at].replace('"status": 200', '"status": [200')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(hermes_replay.CassetteError) as info:
        with hermes_replay.cassette(path, "replay", strict=False):
            client.chat.completions.create(model="m", messages=[
                {"role": "user", "content": "say one"}])
    assert info.value.line == at + 1 and "not valid JSON" in str(info.value)
