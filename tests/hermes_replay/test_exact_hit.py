"""The replay fast path: a request that is byte for byte its turn's recording is answered
without parsing, redaction or fingerprinting; everything else still goes the full way."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx2
import openai
import pytest

import hermes_replay
from hermes_replay._session import wire as _session_wire
from hermes_replay._session.convert import BodyText, ExpectedRequest
from hermes_replay._session.intercept import WireRequest
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def same_request(wire: WireRequest, stored: dict, text: BodyText | None = None) -> bool:
    """Whether the fast path takes ``wire`` for the recording ``stored``."""
    return ExpectedRequest(stored, text).matches(wire)


MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]


@pytest.fixture
def full_path_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts requests that took the full path (``stored_request`` in the session)."""
    calls: list[str] = []
    real = _session_wire.stored_request

    def counting(wire: WireRequest, *args: object) -> dict:
        calls.append(wire.url)
        return real(wire, *args)

    monkeypatch.setattr(_session_wire, "stored_request", counting)
    return calls


def _sdk_run(base: str) -> list[str]:
    client = openai.OpenAI(base_url=base, api_key="sk-test-not-a-real-key-0000", max_retries=0)
    out = []
    for r in range(3):
        with hermes_replay.rollout(f"r{r}"):
            messages = list(MESSAGES)
            for _ in range(2):
                reply = client.chat.completions.create(model="m", messages=messages)
                out.append(reply.id)
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
                messages.append({"role": "user", "content": "and again?"})
    return out


def test_sdk_traffic_replays_on_the_fast_path(tmp_path: Path, full_path_calls: list[str]) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=1) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            recorded = _sdk_run(base)
    assert len(full_path_calls) == 6  # recording always takes the full path
    full_path_calls.clear()
    with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert _sdk_run(base) == recorded
    assert full_path_calls == []
    assert session.summary().interactions == 6


def _record_raw(path: Path, body: dict) -> str:
    with ScriptedEndpoint(script="generic", seed=2) as ep:
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r0"):
            httpx2.post(ep.base_url + "/chat/completions", json=body)
        return ep.base_url


def test_same_content_in_another_key_order_still_matches(tmp_path: Path,
                                                         full_path_calls: list[str]) -> None:
    path = tmp_path / "c.jsonl"
    body = {"model": "m", "messages": MESSAGES, "temperature": 0.5}
    base = _record_raw(path, body)
    full_path_calls.clear()
    reordered = {"temperature": 0.5, "messages": MESSAGES, "model": "m"}
    with hermes_replay.cassette(path, "replay", strict=True), hermes_replay.rollout("r0"):
        assert httpx2.post(base + "/chat/completions", json=reordered).status_code == 200
    assert len(full_path_calls) == 1  # not byte-identical: judged by its fingerprint


def test_a_changed_request_is_a_miss_not_a_fast_hit(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    base = _record_raw(path, {"model": "m", "messages": MESSAGES})
    changed = {"model": "m", "messages": [*MESSAGES[:1], {"role": "user", "content": "3+3?"}]}
    with pytest.raises(hermes_replay.CassetteMiss, match="3\\+3"):
        with hermes_replay.cassette(path, "replay"), hermes_replay.rollout("r0"):
            httpx2.post(base + "/chat/completions", json=changed)


def _stored(body: object, url: str = "http://h/v1/chat/completions?x=1") -> dict:
    return {"method": "POST", "url": url, "body": body}


def _wire(raw: bytes, url: str = "http://other:9/v1/chat/completions?x=1", method: str = "POST",
          headers: list[tuple[str, str]] | None = None) -> WireRequest:
    return WireRequest(method, url, headers or [], raw)


@pytest.mark.parametrize("style", [{"separators": (",", ":"), "ensure_ascii": False}, {}])
def test_same_request_accepts_the_clients_json_styles(style: dict) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}]}
    raw = json.dumps(body, **style).encode()
    assert same_request(_wire(raw), _stored(body))  # the host may differ; path+query may not


def test_same_request_rejects_any_difference_it_can_see() -> None:
    body = {"model": "m", "n": 1}
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert same_request(_wire(gzip.compress(raw), headers=[("Content-Encoding", "gzip")]),
                        _stored(body))
    assert not same_request(_wire(raw, method="PUT"), _stored(body))
    assert not same_request(_wire(raw, url="http://h/v1/completions?x=1"), _stored(body))
    assert not same_request(_wire(raw, url="http://h/v1/chat/completions?x=2"), _stored(body))
    assert not same_request(_wire(raw), _stored({"model": "m", "n": 2}))
    assert not same_request(_wire(raw), _stored({"n": 1, "model": "m"}))  # order: full path
    assert not same_request(_wire(b"plain text"), _stored("plain text"))  # non-JSON: full path


def test_response_style_is_found_whatever_the_previous_server_wrote() -> None:
    """Recording tries the last matching JSON style first; a server that writes another
    style right after must still get its own (byte-identical replay depends on it)."""
    from hermes_replay._session.convert import _json_style

    value = {"id": "x", "choices": [{"text": "é"}]}
    styles = [({"separators": (", ", ": "), "ensure_ascii": True}, "spaced+ascii"),
              ({"separators": (",", ":"), "ensure_ascii": False}, "compact"),
              ({"indent": 2, "ensure_ascii": False}, "indent2"),
              ({"separators": (",", ":"), "ensure_ascii": False}, "compact")]
    for kwargs, name in styles:
        raw = json.dumps(value, **kwargs).encode()
        assert _json_style(value, raw) == name
    assert _json_style(value, b'{"id":"x","choices":[{"text":"\\u00e9"}] }') is None


def _compact(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def test_body_text_is_the_compact_json_of_every_turn_shared_items_or_not() -> None:
    """``BodyText`` reuses the text of list items that are the previous turn's very objects;
    whatever is shared, new, replaced or reordered, its bytes are ``json.dumps``' bytes."""
    tools = [{"type": "function", "function": {"name": "t", "description": "é \u2028 \"q\""}}]
    system = {"role": "system", "content": "Be brief. ünïcode"}
    messages = [system, {"role": "user", "content": "2+2?"}]
    text = BodyText()
    bodies = []
    for turn in range(4):
        bodies.append({"messages": list(messages), "model": "m", "temperature": 1.0,
                       "tools": tools, "n": 1, "stop": None, "x": [1, 2.5, True]})
        messages.append({"role": "assistant", "content": f"turn {turn}", "tool_calls": []})
    bodies.append({"messages": [messages[1], system], "tools": tools})  # reordered items
    bodies.append({"messages": [dict(system, content="changed")], "tools": []})  # replaced
    bodies.append({"tools": tools, "messages": messages})  # another key order
    for body in bodies:
        assert text.dump(body) == _compact(body)
    assert BodyText().dump({1: "a"}) == _compact({1: "a"})  # a non-string key: json's way


def test_a_turn_whose_shared_item_differs_in_the_live_request_is_no_fast_hit() -> None:
    """Reusing text must not hide a difference: the live bytes are compared with the whole
    recorded body, whichever parts of it came from the previous turn's text."""
    shared = {"role": "user", "content": "2+2?"}
    turn0 = {"messages": [shared], "model": "m"}
    turn1 = {"messages": [shared, {"role": "assistant", "content": "4"}], "model": "m"}
    url = "http://127.0.0.1:9/v1/chat/completions"
    text = BodyText()

    def stored(body: dict) -> dict:
        return {"method": "POST", "url": url, "headers": {}, "body": body}

    assert same_request(WireRequest("POST", url, [], _compact(turn0)), stored(turn0), text)
    live = {"messages": [{"role": "user", "content": "2+3?"}, turn1["messages"][1]],
            "model": "m"}
    assert not same_request(WireRequest("POST", url, [], _compact(live)), stored(turn1), text)
    assert same_request(WireRequest("POST", url, [], _compact(turn1)), stored(turn1), text)


def test_what_the_session_wants_is_remembered_but_not_a_declared_endpoint(
        tmp_path: Path) -> None:
    """``wants`` runs for every request a client sends: what the session's own settings
    decide is remembered (bounded), while an endpoint declared during the run still counts."""
    from hermes_replay._session import traffic

    llm = "http://127.0.0.1:9/v1/chat/completions"
    tool = "http://wants-memo.invalid/search"
    with hermes_replay.cassette(tmp_path / "w.jsonl", "record") as session:
        assert session.wants("POST", llm) and session._wants_memo[("POST", llm)] is True
        assert session.wants("POST", llm)  # from memory
        assert not session.wants("POST", tool) and ("POST", tool) not in session._wants_memo
        try:
            hermes_replay.recorded_endpoint("http://wants-memo.invalid/")
            assert session.wants("POST", tool)  # declared after the first ask: seen
        finally:
            traffic._PREFIXES.discard("http://wants-memo.invalid/")
        for i in range(2000):
            session.wants("POST", f"{llm}?n={i}")
        assert len(session._wants_memo) <= 1024


def test_a_prepared_answer_is_used_once_and_let_go(tmp_path: Path) -> None:
    """The fast path makes a rollout's expected bytes and answers at its first request; each
    is dropped when its turn is answered (nothing of them is held to the end)."""
    path = tmp_path / "p.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record"):
            recorded = _sdk_run(ep.base_url)
    with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert _sdk_run("http://127.0.0.1:9/v1") == recorded
        recs = list(session._index.by_key.values())
        assert recs and all(r.used and r.answer is None and r.expected is None for r in recs)
