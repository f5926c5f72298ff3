"""The cassette file format: round trip, compact encoding, versioning, errors, journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay._cassette import (
    SCHEMA_VERSION,
    CassetteHeader,
    CassetteWriter,
    Interaction,
    load_cassette,
    partial_path,
    write_cassette,
)
from hermes_replay._errors import CassetteError

SYSTEM = "You are a careful agent. Follow the rules.\n" * 20
TOOLS = [{"type": "function", "function": {"name": "terminal", "description": "run " * 50,
                                           "parameters": {"type": "object"}}}]


def _conversation(rollout: str, turns: int) -> list[Interaction]:
    messages: list[dict] = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"task for {rollout}"}]
    out = []
    for seq in range(turns):
        body = {"model": "m", "messages": list(messages), "tools": TOOLS, "temperature": 1.0}
        reply = {"role": "assistant", "content": f"{rollout} turn {seq} " + "x" * 300}
        out.append(Interaction(
            rollout=rollout, seq=seq, kind="chat",
            request={"method": "POST", "url": "http://h/v1/chat/completions",
                     "headers": {"content-type": "application/json"}, "body": body},
            response={"status": 200, "headers": {"content-type": "application/json"},
                      "body": {"choices": [{"message": reply}]}},
            fingerprint=f"f{seq}", duration_ms=1.25))
        messages += [reply, {"role": "tool", "content": f"result {seq}"}]
    return out


def test_round_trip_reconstructs_full_requests(tmp_path: Path) -> None:
    inters = _conversation("r1", 4) + _conversation("r0", 2)
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(env_name="demo", model="m"), inters,
                   {"r1": {"reward": 0.5, "turns_used": 4}})
    c = load_cassette(path)
    assert c.complete and c.header.env_name == "demo"
    assert c.header.schema_version == SCHEMA_VERSION
    # stable order: rollouts sorted by id, each in seq order
    assert [i.key for i in c.interactions] == [("r0", 0), ("r0", 1)] + [("r1", s) for s in range(4)]
    by_key = {i.key: i for i in inters}
    for inter in c.interactions:
        assert inter.request["body"] == by_key[inter.key].request["body"]
        assert inter.request["path"] == "/v1/chat/completions"
        assert inter.response == {**by_key[inter.key].response, "chunks": None}
    assert list(c.rollouts) == ["r0", "r1"]
    assert c.rollouts["r1"].outcome == {"reward": 0.5, "turns_used": 4}
    assert len(c.rollouts["r1"].interactions) == 4


def test_repeated_values_stored_once_and_turns_as_deltas(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(), _conversation("a", 3) + _conversation("b", 3))
    text = path.read_text()
    # system prompt: one blob (it repeats its sentence 20 times itself)
    assert text.count("You are a careful agent") == SYSTEM.count("You are a careful agent")
    assert text.count('"name": "terminal"') == 1      # tool list: one blob
    records = [json.loads(line) for line in text.splitlines()]
    second = [r for r in records if r.get("type") == "interaction"][1]
    delta = second["request"]["body"]["messages"]["$delta"]
    assert delta["prev"] == 0 and delta["keep"] == 2 and len(delta["append"]) == 2


def test_size_grows_linearly_with_turns(tmp_path: Path) -> None:
    def size(turns: int) -> int:
        path = tmp_path / f"c{turns}.jsonl"
        write_cassette(path, CassetteHeader(), _conversation("r", turns))
        return path.stat().st_size

    # storing every request verbatim grows with the square of the turns
    verbatim = sum(len(json.dumps(i.request["body"])) for i in _conversation("r", 20))
    full_conversation = len(json.dumps(_conversation("r", 20)[-1].request["body"]))
    s1, s10, s20 = size(1), size(10), size(20)
    assert s20 < verbatim / 3
    assert s20 < 3 * full_conversation  # requests + responses, each message stored ~once
    assert (s20 - s10) < 1.2 * (s10 - s1) * (10 / 9)  # linear: equal steps, equal growth


def test_newer_schema_names_file_line_and_next_step(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({"type": "header", "schema_version": SCHEMA_VERSION + 1}) + "\n")
    with pytest.raises(CassetteError) as info:
        load_cassette(path)
    text = str(info.value)
    assert f"{path}:1:" in text and "newer" in text and "re-record" in text


def test_bad_json_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(), _conversation("r", 2))
    lines = path.read_text().splitlines()
    lines.insert(2, "{not json")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CassetteError, match=r"c\.jsonl:3: not valid JSON"):
        load_cassette(path)


def test_missing_file_and_missing_header(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="no such cassette"):
        load_cassette(tmp_path / "absent.jsonl")
    path = tmp_path / "x.jsonl"
    path.write_text('{"type": "interaction"}\n')
    with pytest.raises(CassetteError, match=r"x\.jsonl:1: line 1 is not a cassette header"):
        load_cassette(path)


def test_unknown_blob_reference_is_an_error_with_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(), _conversation("r", 1))
    lines = [line for line in path.read_text().splitlines()
             if json.loads(line)["type"] != "blob"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CassetteError, match=r"c\.jsonl:2: bad interaction record: .*blob"):
        load_cassette(path)


def test_journal_is_readable_as_partial_and_commit_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(env_name="old"), _conversation("old", 1))
    before = path.read_bytes()
    writer = CassetteWriter(path, CassetteHeader(env_name="new"))
    inters = _conversation("r", 3)
    # provisional numbers (order of issue with a gap where an attempt failed)
    for inter, provisional in zip(inters, (0, 2, 3), strict=True):
        writer.interaction(inter.model_copy(update={"seq": provisional}))
    writer.annotate({"env_name": "annotated", "tokenizer": {"name": "t", "fingerprint": "f"}})
    writer.outcome("r", {"reward": 1.0})
    assert path.read_bytes() == before  # the old cassette is untouched while recording
    partial = load_cassette(partial_path(path))
    assert not partial.complete
    assert [i.seq for i in partial.interactions] == [0, 1, 2]
    assert [i.request["body"] for i in partial.interactions] == [
        i.request["body"] for i in inters]
    assert partial.header.env_name == "annotated"
    assert partial.header.tokenizer == {"name": "t", "fingerprint": "f"}
    assert partial.rollouts["r"].outcome == {"reward": 1.0}
    writer.commit(partial.header, partial.interactions, {"r": {"reward": 1.0}})
    assert not partial_path(path).exists()
    final = load_cassette(path)
    assert final.complete and final.header.env_name == "annotated"
    assert '"annotate"' not in path.read_text()


def test_partial_with_torn_last_line_keeps_completed_records(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    writer = CassetteWriter(path, CassetteHeader())
    for inter in _conversation("r", 2):
        writer.interaction(inter)
    writer.close()
    journal = partial_path(path)
    journal.write_text(journal.read_text() + '{"type": "interaction", "rollo')
    c = load_cassette(journal)
    assert [i.key for i in c.interactions] == [("r", 0), ("r", 1)]
    with pytest.raises(CassetteError, match=r"an interrupted recording is in .*c\.jsonl\.partial"):
        load_cassette(path)
    # the same tear in a finished cassette is corruption, reported with its line
    bad = tmp_path / "bad.jsonl"
    bad.write_text(journal.read_text())
    with pytest.raises(CassetteError, match="not valid JSON"):
        load_cassette(bad)


def test_duplicate_key_in_finished_cassette_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(), _conversation("r", 1))
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[-1]]) + "\n")
    with pytest.raises(CassetteError, match="duplicate recording for rollout 'r' turn 0"):
        load_cassette(path)


def test_header_merge_puts_unknown_fields_in_extra() -> None:
    header = CassetteHeader().merged({"env_name": "e", "group_size": 8, "model": "q"})
    assert header.env_name == "e" and header.model == "q"
    assert header.extra == {"group_size": 8}


def test_generate_token_ids_are_delta_encoded(tmp_path: Path) -> None:
    inters = []
    ids = list(range(500))
    for seq in range(3):
        body = {"prompt": {"prompt_token_ids": list(ids)}, "logprobs": 0}
        inters.append(Interaction(rollout="g", seq=seq, kind="generate",
                                  request={"method": "POST", "url": "http://h/generate",
                                           "headers": {}, "body": body},
                                  response={"status": 200, "headers": {}, "body": {"ok": seq}}))
        ids += list(range(1000 + seq * 10, 1010 + seq * 10))
    path = tmp_path / "g.jsonl"
    write_cassette(path, CassetteHeader(), inters)
    c = load_cassette(path)
    assert [i.request["body"] for i in c.interactions] == [i.request["body"] for i in inters]
    assert path.stat().st_size < 2 * len(json.dumps(inters[-1].request["body"]))


def test_rewriting_a_loaded_cassette_is_byte_stable(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    sse = Interaction(rollout=None, seq=0, kind="chat", request={
        "method": "POST", "url": "http://h/v1/chat/completions", "headers": {}, "body": {}},
        response={"status": 200, "headers": {}, "chunks": ["data: {}\n\n", "data: [DONE]\n\n"]})
    write_cassette(first, CassetteHeader(), [sse, *_conversation("r", 3)], {"r": {"reward": 1}})
    c = load_cassette(first)
    assert c.interactions[0].response["body"] is None
    write_cassette(second, c.header, c.interactions, c.outcomes)
    assert second.read_bytes() == first.read_bytes()


def test_tool_lists_that_differ_only_in_json_types_are_separate_blobs(tmp_path: Path) -> None:
    """A tool list's blob id is remembered by the list's ``marshal`` bytes: one that ``==``
    another (True == 1) but is other JSON gets its own blob, and each decodes as written."""
    from hermes_replay._cassette.format import BodyEncoder, blob_id

    strict = [{"type": "function", "function": {"name": "t", "strict": True}}]
    loose = [{"type": "function", "function": {"name": "t", "strict": 1}}]
    assert strict == loose and blob_id(strict) != blob_id(loose)
    encoder = BodyEncoder()
    first = encoder.encode("r", 0, {"tools": strict})[1]["tools"]["$blob"]
    again = encoder.encode("r", 1, {"tools": json.loads(json.dumps(strict))})[1]["tools"]
    other = encoder.encode("r", 2, {"tools": loose})[1]["tools"]["$blob"]
    assert again == {"$blob": first} and first == blob_id(strict) and other == blob_id(loose)
    path = tmp_path / "types.jsonl"
    bodies = [{"model": "m", "tools": strict}, {"model": "m", "tools": loose}]
    write_cassette(path, CassetteHeader(), [
        Interaction(rollout=f"r{i}", seq=0, kind="chat", response={"status": 200},
                    request={"method": "POST", "url": "http://h/v1/chat/completions",
                             "body": body}) for i, body in enumerate(bodies)], {})
    got = [i.request["body"]["tools"][0]["function"]["strict"]
           for i in load_cassette(path).interactions]
    assert [type(v) for v in got] == [bool, int]
