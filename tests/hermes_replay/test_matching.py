"""Fingerprints, ignore paths, normalizers, and the diff a miss shows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hermes_replay
from hermes_replay._cassette.matching import Matcher, similarity, unified_request_diff
from hermes_replay.scripted_endpoint import ScriptedEndpoint

SYSTEM = "You are a coding agent.\nAlways run the tests.\nAnswer in English.\nBe brief."


def _req(body: dict, url: str = "http://127.0.0.1:1/v1/chat/completions") -> dict:
    return {"method": "POST", "url": url, "headers": {"x-stainless-retry-count": "1"},
            "body": body}


def test_fingerprint_ignores_key_order_host_headers_and_defaults() -> None:
    m = Matcher.build()
    a = _req({"model": "m", "messages": [{"role": "user", "content": "hi"}], "user": "u1"})
    b = _req({"messages": [{"content": "hi", "role": "user"}], "model": "m", "user": "u2",
              "metadata": {"run": 7}}, url="https://api.example.com/v1/chat/completions")
    b["headers"] = {"authorization": "<redacted:authorization>"}
    assert m.fingerprint(a) == m.fingerprint(b)
    assert m.fingerprint(a) != m.fingerprint(_req({"model": "m2", "messages": []}))
    strict = Matcher.build(default_ignores=False)
    assert strict.fingerprint(a) != strict.fingerprint(b)


def test_method_path_and_query_count() -> None:
    m = Matcher.build()
    base = _req({"x": 1})
    assert m.fingerprint(base) != m.fingerprint({**base, "url": base["url"] + "?api-version=2"})
    assert m.fingerprint(base) != m.fingerprint({**base, "url": base["url"].replace(
        "chat/completions", "completions")})


def test_ignore_paths_with_wildcards_and_indices() -> None:
    body = {"messages": [{"role": "system", "content": "a", "name": "x"},
                         {"role": "user", "content": "b", "name": "y"}], "tools": [1, 2]}
    other = {"messages": [{"role": "system", "content": "a", "name": "p"},
                          {"role": "user", "content": "b", "name": "q"}], "tools": [1, 3]}
    assert Matcher.build().fingerprint(_req(body)) != Matcher.build().fingerprint(_req(other))
    m = Matcher.build(["body.messages[*].name", "body.tools[1]"])
    assert m.fingerprint(_req(body)) == m.fingerprint(_req(other))
    canon = m.canonical(_req(body))
    assert canon["body"]["tools"] == [1]
    assert all("name" in msg for msg in body["messages"])  # the input is not mutated
    with pytest.raises(ValueError, match="is not a field path"):
        Matcher.build(["..."])


def test_normalizers_apply_before_hashing() -> None:
    m = Matcher.build(normalizers=[(r"/tmp/[\w-]+", "/tmp/<dir>"),
                                   (r"\d{4}-\d\d-\d\dT[\d:]+", "<time>")])
    a = _req({"messages": [{"content": "cwd /tmp/abc-1 at 2026-01-01T10:00:00"}]})
    b = _req({"messages": [{"content": "cwd /tmp/zz-9 at 2027-05-05T11:11:11"}]})
    assert m.fingerprint(a) == m.fingerprint(b)
    assert Matcher.build().fingerprint(a) != Matcher.build().fingerprint(b)


def test_diff_shows_only_the_changed_line_of_a_multiline_prompt() -> None:
    m = Matcher.build()
    old = m.render(_req({"messages": [{"role": "system", "content": SYSTEM}]}))
    new = m.render(_req({"messages": [{"role": "system",
                                       "content": SYSTEM.replace("English", "French")}]}))
    diff = unified_request_diff(old, new, "recorded", "request")
    changed = [line for line in diff.splitlines()
               if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert changed == ["-body.messages[0].content | Answer in English.",
                       "+body.messages[0].content | Answer in French."]
    assert 0 < similarity(old, new) < 1


def test_long_changed_lines_are_clipped_around_the_change() -> None:
    old = ["body.prompt: " + '"' + "a" * 500 + "X" + "b" * 500 + '"']
    new = ["body.prompt: " + '"' + "a" * 500 + "Y" + "b" * 500 + '"']
    diff = unified_request_diff(old, new, "r", "q")
    minus = next(line for line in diff.splitlines() if line.startswith("-a") or
                 line.startswith("-…"))
    assert "X" in minus and len(minus) < 200


def test_replay_miss_names_cassette_rollout_turn_and_changed_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"

    def run(base: str, system: str) -> None:
        client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
        with hermes_replay.rollout("train-abc-0-3"):
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
            first = client.chat.completions.create(model="m", messages=msgs)
            msgs += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "user", "content": "again"}]
            client.chat.completions.create(model="m", messages=msgs)

    with ScriptedEndpoint(script="generic") as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            run(base, SYSTEM)
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path, "replay") as session:
            with pytest.raises(hermes_replay.RequestNotRecorded):
                run(base, SYSTEM.replace("Always run the tests.", "Never run the tests."))
    text = str(info.value)
    assert str(path) in text and "rollout 'train-abc-0-3', turn 1" in text
    assert "-body.messages[0].content | Always run the tests." in text
    assert "+body.messages[0].content | Never run the tests." in text
    (miss,) = session.misses
    assert (miss.rollout, miss.turn, miss.nearest) == ("train-abc-0-3", 1, ("train-abc-0-3", 0))
    assert "differs from the recording of this turn" in miss.reason
    assert session.unused == [("train-abc-0-3", 0), ("train-abc-0-3", 1)]


def test_miss_in_an_unknown_rollout_points_at_the_nearest_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            client = openai.OpenAI(base_url=base, api_key="x")
            for rid, word in (("a", "apples"), ("b", "bananas")):
                with hermes_replay.rollout(rid):
                    client.chat.completions.create(model="m", messages=[
                        {"role": "user", "content": f"I like {word}"}])
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path, "replay"):
            with hermes_replay.rollout("c"):
                with pytest.raises(hermes_replay.RequestNotRecorded):
                    client.chat.completions.create(model="m", messages=[
                        {"role": "user", "content": "I like bananas!"}])
    (miss,) = info.value.misses
    assert "no rollout 'c'" in miss.reason and "'a', 'b'" in miss.reason
    assert miss.nearest == ("b", 0)


def test_ignore_paths_turn_a_miss_into_a_hit_without_re_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            openai.OpenAI(base_url=base, api_key="x").chat.completions.create(
                model="m", messages=MESSAGES_WITH_TIME("2026-01-01 10:00"))
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    with hermes_replay.cassette(path, "replay",
                                normalizers=[(r"\d{4}-\d\d-\d\d \d\d:\d\d", "<t>")]):
        assert client.chat.completions.create(
            model="m", messages=MESSAGES_WITH_TIME("2030-12-31 23:59")).choices


def MESSAGES_WITH_TIME(stamp: str) -> list[dict]:
    return [{"role": "user", "content": f"It is {stamp}. Say hi."}]


def test_stored_fingerprints_are_reused_only_under_the_same_matcher(tmp_path: Path) -> None:
    """A cassette says which matcher wrote its fingerprints; another matcher recomputes them."""
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        base_url = ep.base_url
        client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
        with hermes_replay.cassette(path, mode="record"), hermes_replay.rollout("r"):
            client.chat.completions.create(
                model="m", temperature=1.0, messages=[{"role": "user", "content": "hi"}])
    cas = hermes_replay.load_cassette(path)
    assert cas.header.extra["matcher"] == Matcher.build().signature()
    assert cas.interactions[0].fingerprint == Matcher.build().fingerprint(
        cas.interactions[0].request)

    # Same request with another temperature: a miss under the recording's matcher …
    offline = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)  # endpoint stopped
    with pytest.raises(hermes_replay.CassetteMiss, match="temperature"):
        with hermes_replay.cassette(path), hermes_replay.rollout("r"):
            with pytest.raises(hermes_replay.RequestNotRecorded):
                offline.chat.completions.create(
                    model="m", temperature=0.5, messages=[{"role": "user", "content": "hi"}])
    # … and a hit once the user ignores it: the stored fingerprints are not trusted then.
    ignoring = Matcher.build(["body.temperature"])
    assert ignoring.signature() != Matcher.build().signature()
    with hermes_replay.cassette(path, ignore_paths=["body.temperature"]) as session:
        with hermes_replay.rollout("r"):
            offline.chat.completions.create(
                model="m", temperature=0.5, messages=[{"role": "user", "content": "hi"}])
    assert not session.misses


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70), st.sampled_from([1.0, -0.0, 0.5]),
              st.text("aé\u2028\"\\1 ", max_size=4)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["role", "content", "name", "é", "metadata", "1"]), inner, max_size=3),
    max_leaves=12)
_BODIES = st.dictionaries(st.sampled_from(["messages", "model", "user", "tools", "n", "ü"]),
                          st.one_of(st.lists(_JSON, max_size=4), _JSON), max_size=5)
_MATCHERS = [Matcher.build(), Matcher.build(normalizers=[(r"\d", "#")]),
             Matcher.build(["body.messages[*].name"]), Matcher.build(["body.n", "query"]),
             Matcher.build(["body.*"])]


@settings(max_examples=300, deadline=None)
@given(body=_BODIES, url=st.sampled_from(["http://h/v1/chat/completions?b=2&a=1", "http://h"]))
def test_a_fingerprint_is_the_hash_of_the_sorted_canonical_json(body: dict,
                                                                url: str) -> None:
    """The fingerprint remembers each body-list item's text by its ``marshal`` bytes; it must
    stay exactly the hash of ``json.dumps(canonical, sort_keys=True)``, for every matcher,
    whatever was remembered before (True and 1, 1 and 1.0 are different JSON)."""
    request = {"method": "POST", "url": url, "headers": {}, "body": body}
    for matcher in _MATCHERS:
        text = json.dumps(matcher.canonical(request), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
        assert matcher.fingerprint(request) == hashlib.sha256(
            text.encode("utf-8")).hexdigest()[:16]


def test_items_equal_but_of_other_types_are_not_taken_for_each_other() -> None:
    matcher = Matcher.build()
    one = {"method": "POST", "url": "http://h/v1", "body": {"messages": [{"x": 1}]}}
    true = {"method": "POST", "url": "http://h/v1", "body": {"messages": [{"x": True}]}}
    assert matcher.fingerprint(one) != matcher.fingerprint(true)
    assert matcher.fingerprint(true) != matcher.fingerprint(one)  # the other order, too
