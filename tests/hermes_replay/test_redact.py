"""Secrets never reach a cassette: headers, query parameters, bodies, response cookies."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest
from _core_helpers import SECRET, TinyServer

import hermes_replay
from hermes_replay._secrets.redact import (
    might_hold_secret,
    needs_redaction,
    redact_headers,
    redact_json,
    redact_text,
    redact_url,
)

KEYS = {
    "openai": "sk-proj-AbCdEf0123456789GhIjKl",
    "hf": "hf_abcdefghijklmnopqrstuvwxyz012345",
    "google": "AIzaSyA-0123456789abcdefghijklmnopqrs",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
}


def test_headers_keep_an_allow_list_and_mark_secrets() -> None:
    out = redact_headers([("Authorization", "Bearer x"), ("api-key", "k"), ("X-Api-Key", "k"),
                          ("Cookie", "a=b"), ("Set-Cookie", "s=1"), ("Content-Type", "app/json"),
                          ("Proxy-Authorization", "Basic y"), ("X-Stainless-OS", "Linux"),
                          ("User-Agent", "OpenAI/Python 3.57")])
    assert out == {"authorization": "<redacted:authorization>", "api-key": "<redacted:api-key>",
                   "x-api-key": "<redacted:api-key>", "cookie": "<redacted:cookie>",
                   "set-cookie": "<redacted:cookie>", "content-type": "app/json",
                   "proxy-authorization": "<redacted:authorization>"}


def test_query_parameters_and_userinfo() -> None:
    url = redact_url("https://user:pw@h.example/v1/x?key=AAA&api_key=BBB&model=m&token=CCC")
    assert "AAA" not in url and "BBB" not in url and "CCC" not in url and "pw" not in url
    assert "model=m" in url and "key=<redacted:key>" in url


def test_body_patterns_and_secret_fields() -> None:
    body = {"messages": [{"content": f"use {KEYS['openai']} and {KEYS['hf']}"}],
            "api_key": "plain-secret", "nested": {"access_token": "tok-value-9"},
            "note": f'{{"api_key": "inline-secret"}} {KEYS["google"]} {KEYS["bearer"]}'}
    text = str(redact_json(body))
    for secret in [*KEYS.values(), "plain-secret", "tok-value-9", "inline-secret"]:
        assert secret.removeprefix("Bearer ") not in text, secret
    assert "<redacted:api_key>" in text and "<redacted:openai-key>" in text
    assert redact_text("nothing secret here: sk-short") == "nothing secret here: sk-short"


def test_nothing_secret_is_written_while_recording(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with TinyServer() as server:
        with hermes_replay.cassette(path, "record"):
            client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEYS["openai"],
                                   default_headers={"X-Api-Key": KEYS["hf"],
                                                    "Cookie": "sid=cookie-secret-123"},
                                   default_query={"key": "query-secret-456"})
            client.chat.completions.create(model="m", messages=[
                {"role": "user", "content": f"my key is {KEYS['google']}"}])
            httpx.post(server.url + "/v1/chat/completions?api_key=query-secret-789",
                       json={"messages": [], "api_key": "body-secret-000"},
                       headers={"Authorization": KEYS["bearer"]})
        # the server did get the real key: redaction only touches what is written
        assert any(KEYS["google"].encode() in body for _, _, body in server.requests)
    text = path.read_text()
    for secret in [*KEYS.values(), "cookie-secret-123", "query-secret-456", "query-secret-789",
                   "body-secret-000", SECRET, "abcdef123456"]:
        assert secret.removeprefix("Bearer ") not in text, secret
    assert "<redacted:authorization>" in text and "<redacted:cookie>" in text
    # and replay needs no key at all
    with hermes_replay.cassette(path, "replay"):
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused",
                               default_query={"key": "another"}, max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[
            {"role": "user", "content": f"my key is {KEYS['google']}"}])
    assert reply.choices[0].message.content == "echo 1"


@pytest.mark.parametrize("raw", [
    '{"h": "Bearer abcdefgh12345"}', '{"k": "sk-abcdefghijklmnopqrstu"}', '{"api_key": "x"}',
    '{"openai_api_key": "x"}', '{"refresh_token": "x"}', '{"password": "x"}',
    '{"t": "hf_abcdefghijklmnopqrstuvw"}', '{"\\u0061pi_key": "x"}',
    '{"x": "AKIAABCDEFGHIJKLMNOP"}',
])
def test_prefilter_sends_anything_redactable_down_the_full_path(raw: str) -> None:
    assert might_hold_secret(raw)


def test_prefilter_lets_an_ordinary_request_skip_redaction() -> None:
    body = json.dumps({"model": "m", "max_tokens": 512, "temperature": 1.0,
                       "messages": [{"role": "user", "content": "Compute 2+2 with the terminal"}],
                       "tools": [{"type": "function", "function": {"name": "terminal"}}]})
    # field names are judged by the name rules ("max_tokens" is sampling, not a credential);
    # only the strings' text goes through the substring prefilter
    assert not needs_redaction(json.loads(body))
    assert not might_hold_secret("Compute 2+2 with the terminal")
    assert redact_json(json.loads(body)) == json.loads(body)


@pytest.mark.parametrize("raw", [
    '{"h": "Bearer abcdefgh12345"}', '{"k": ["sk-abcdefghijklmnopqrstu"]}', '{"api_key": "x"}',
    '{"a": {"openai_api_key": "x"}}', '{"refresh_token": "x"}', '{"password": "x"}',
    '{"t": "hf_abcdefghijklmnopqrstuvw"}', '{"\\u0061pi_key": "x"}',
    '{"x": "see AKIAABCDEFGHIJKLMNOP"}', '{"c": "{\\"secret\\": \\"s\\"}"}',
])
def test_needs_redaction_agrees_with_redact_json(raw: str) -> None:
    value = json.loads(raw)
    assert redact_json(value) != value  # each case is something redaction changes
    assert needs_redaction(value)
    assert needs_redaction(value)  # and still after a first look (nothing secret is cached)


def test_needs_redaction_scans_a_repeated_string_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn N of a rollout repeats turns 0..N-1: only the new strings are scanned."""
    from hermes_replay._secrets import redact as _redact

    monkeypatch.setattr(_redact, "_CLEAN", {})  # what other tests left there
    scanned: list[str] = []
    real = _redact.might_hold_secret
    monkeypatch.setattr(_redact, "might_hold_secret",
                        lambda text: scanned.append(text) or real(text))
    system = "You are a careful agent. " * 40 + "(unique 7d3f)"
    turn0 = {"messages": [{"role": "system", "content": system}]}
    assert not needs_redaction(turn0)
    assert system in scanned[0]
    scanned.clear()
    turn1 = {"messages": [{"role": "system", "content": system},
                          {"role": "user", "content": "hello 7d3f"}]}
    assert not needs_redaction(turn1)
    assert len(scanned) == 1 and set(scanned[0].split("\n")) == {"hello 7d3f", "user"}
    turn2 = {"messages": [*turn1["messages"], {"role": "tool", "content": "sk-" + "a" * 24}]}
    assert needs_redaction(turn2)


def test_redact_json_scans_a_clean_string_once_and_a_secret_every_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a turn holds a marker word, the whole request is redacted: the conversation it
    repeats must not be scanned again (the +6 ms per recorded request of issue 27), yet a
    secret is replaced every time and a value that becomes known is found in old strings."""
    from hermes_replay._secrets import redact as _redact
    from hermes_replay._secrets.known import KNOWN

    monkeypatch.setattr(_redact, "_CLEAN", {})
    scanned: list[str] = []
    real = _redact.secret_spans
    monkeypatch.setattr(_redact, "secret_spans",
                        lambda text, known=None: scanned.append(text) or real(text, known))
    prose = "the token budget of turn 1 is 512 (a8c1)"  # a marker word, no secret
    secret = "here: sk-" + "b" * 24
    for _ in range(3):
        out = redact_json({"messages": [{"content": prose}, {"content": secret}]})
        assert out["messages"][0]["content"] == prose
        assert "sk-" + "b" * 24 not in json.dumps(out)
    assert scanned.count(prose) == 1
    assert scanned.count(secret) == 3
    with KNOWN.scope():
        KNOWN.add("budget of turn 1", "test")  # (a value known only now)
        out = redact_json({"content": prose})
    assert "budget of turn 1" not in out["content"], out
    assert redact_json({"content": prose}) == {"content": prose}


def test_a_rollouts_repeated_clean_messages_are_not_walked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``CleanBodies``: turn N's messages that equal turn N-1's, which needed no scrub, are
    skipped by ``needs_redaction``; a secret in a new item is still found, and so is a value
    that became known since in an old one (the memo is of the known secrets' generation)."""
    from hermes_replay._secrets import redact as _redact
    from hermes_replay._secrets.known import KNOWN
    from hermes_replay._secrets.redact import CleanBodies

    walked: list[object] = []
    real = _redact.is_secret_name
    monkeypatch.setattr(_redact, "is_secret_name",
                        lambda name, kind: walked.append(name) or real(name, kind))
    clean = CleanBodies()
    m0 = {"role": "system", "content": "Plan with care (b71e)."}
    turn0 = {"model": "m", "messages": [m0]}
    assert not needs_redaction(turn0, clean.get("r0"))
    clean.put("r0", turn0)
    walked.clear()
    # a fresh parse of the same conversation: equal, not the same objects
    turn1 = json.loads(json.dumps({"model": "m", "messages": [m0, {"role": "user",
                                                                  "content": "go on"}]}))
    assert not needs_redaction(turn1, clean.get("r0"))
    assert walked.count("role") == 1  # the new message's keys only
    clean.put("r0", turn1)
    turn2 = {"model": "m", "messages": [*turn1["messages"],
                                        {"role": "tool", "content": "sk-" + "c" * 24}]}
    assert needs_redaction(turn2, clean.get("r0"))
    with KNOWN.scope():
        KNOWN.add("Plan with care", "test")  # known only now: the old message is dirty
        assert clean.get("r0") is None
        assert needs_redaction(turn1, clean.get("r0"))


class _Int(int):
    """An int subclass: not one of the exact types skipped whole, so walked as before."""


@pytest.mark.parametrize("items", [
    [1, 2, 3, KEYS["openai"]],  # a key after a run of token ids
    [0.5, None, True, [1, 2, {"note": KEYS["hf"]}]],  # nested below numbers
    [_Int(7), KEYS["google"]],
])
def test_a_secret_among_numbers_is_still_found(items: list) -> None:
    """Lists of numbers only (token ids, logprobs) are skipped whole by the report's scrub;
    one string, list or dict among them sends the list down the full walk again."""
    from hermes_replay._secrets.scan import scan_value

    value = {"tokens": {"ids": items}}
    assert needs_redaction(value)
    assert redact_json(value) != value
    found = list(scan_value(value, "report"))
    assert found and found[0].split(" in ")[1].startswith("report.tokens.ids[")


def test_numbers_only_lists_hold_nothing_to_find() -> None:
    from hermes_replay._secrets.rules import scalars_only
    from hermes_replay._secrets.scan import scan_value

    value = {"ids": list(range(5000)), "logprobs": [-0.25, None, 0.0], "flags": [True, False]}
    assert scalars_only(value["ids"]) and scalars_only(value["logprobs"])
    assert not scalars_only([1, "2"]) and not scalars_only([1, [2]]) and not scalars_only([_Int(1)])
    assert not needs_redaction(value)
    assert list(scan_value(value, "report")) == []
