"""One rule set for record and verify: every family and spelling an adversarial probe planted
is scrubbed by redaction and found by ``verify``; data that only looks similar is left alone;
redaction is idempotent, so what ``record`` writes always verifies clean."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from _reliability_helpers import line_of, read_records, record_sample, write_records

from hermes_replay._cassette.verify import verify_file
from hermes_replay._secrets.known import KNOWN
from hermes_replay._secrets.redact import (
    redact_argv,
    redact_headers,
    redact_json,
    redact_text,
    redact_url,
)
from hermes_replay._secrets.rules import is_secret_name
from hermes_replay._secrets.scan import scan_command, scan_string, scan_value

# Built at run time so this file holds no key-shaped literal.
R = "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv"
SHAPED = {
    "openai": "sk-proj-" + R,
    "anthropic": "sk-ant-api03-" + R,
    "google": "AIza" + "Sy" + R + "123",
    "huggingface": "hf_" + R,
    "github": "ghp_" + R + "1234",
    "github fine-grained": "github_pat_" + R + "_" + R,
    "gitlab": "glpat-" + R[:20],
    "slack": "xoxb-" + "1234-5678-" + R,
    "stripe": "sk_" + "live_" + R,
    "groq": "gsk_" + R,
    "aws key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "sig" + R,
    "pem": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow" + R + "\n-----END RSA PRIVATE KEY-----",
    "database url": "postgres://admin:" + "S3cretPw" + R[:6] + "@db.internal:5432/app",
}
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"


@pytest.fixture(autouse=True)
def _forget_known_values():
    with KNOWN.scope():
        yield


def _core(value: str) -> str:
    """The part of a planted value that must not survive (a URL's password, not its host)."""
    return value.split(":", 2)[2].split("@")[0] if value.startswith("postgres://") else value


@pytest.mark.parametrize("family", sorted(SHAPED))
def test_every_family_is_scrubbed_in_free_text_and_found_by_verify(family: str) -> None:
    secret = SHAPED[family]
    text = f"the tool printed: {secret} (done)"
    redacted = redact_text(text)
    assert _core(secret) not in redacted and "<redacted" in redacted
    assert list(scan_string(text, "here", credential_slot=False)), family
    assert list(scan_string(redacted, "here", credential_slot=False)) == []
    assert redact_text(redacted) == redacted  # idempotent


def test_aws_secret_key_without_a_name_is_scrubbed_next_to_its_key_id() -> None:
    text = f"{SHAPED['aws key id']}:{AWS_SECRET}"
    assert AWS_SECRET not in redact_text(text)
    assert AWS_SECRET not in redact_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}")


PROBE_QUERY = ["x_token", "private_token", "api_token", "X-Amz-Signature",
               "X-Amz-Security-Token", "jwt", "access-key", "bearer", "key", "sig"]


@pytest.mark.parametrize("name", PROBE_QUERY)
def test_credential_query_parameters_of_every_spelling(name: str) -> None:
    url = f"https://h.example/v1/chat/completions?model=m&{name}=Val{R}"
    redacted = redact_url(url)
    assert R not in redacted and "model=m" in redacted
    assert list(scan_value({"url": url}))
    assert list(scan_value({"url": redacted})) == []


PROBE_FIELDS = ["aws_secret_access_key", "secret_access_key", "bearer_token", "api_token",
                "private_token", "passphrase", "credential", "judge_token", "secretAccessKey",
                "X-Auth-Token", "db_pass", "openai_api_key", "client_secret"]


@pytest.mark.parametrize("name", PROBE_FIELDS)
def test_credential_fields_of_every_spelling_in_bodies_and_in_json_text(name: str) -> None:
    body = {"messages": [{"role": "tool", "content": json.dumps({name: "Val" + R})}],
            "metadata": {name: "Val" + R}}
    redacted = redact_json(body)
    assert R not in json.dumps(redacted)
    assert list(scan_value(body))
    assert list(scan_value(redacted)) == []


def test_nested_values_under_a_credential_name_are_secret() -> None:
    body = {"auth": {"user": "me", "pwd": "Val" + R}, "credentials": ["Val" + R]}
    assert R not in json.dumps(redact_json(body))
    assert len(list(scan_value(body))) >= 2


@pytest.mark.parametrize("name", ["eos_token", "max_tokens", "token", "key", "signature",
                                  "cache_key", "token_ids", "input_tokens", "pad_token",
                                  "tokenizer_name", "keywords", "passages", "authors"])
def test_data_names_are_not_credentials(name: str) -> None:
    assert not is_secret_name(name, "field")
    value = {name: "<|im_end|>abc123", "logprobs": [{"token": "Hel", "bytes": [72]}]}
    assert redact_json(value) == value
    assert list(scan_value(value)) == []


def test_known_values_are_scrubbed_inside_any_text() -> None:
    hexkey = "0123456789abcdef" * 4
    KNOWN.add(hexkey, "api-key")
    environ = f"HOME=/root\0MY_LLM={hexkey}\0PATH=/bin"
    assert hexkey not in redact_text(environ)
    body = {"error": {"message": f"Incorrect API key provided: {hexkey}."}}
    assert hexkey not in json.dumps(redact_json(body))
    assert list(scan_value(body))


@pytest.mark.parametrize(("header", "value", "echo"), [
    ("x-api-key", "plain" + R, "plain" + R),
    ("cookie", "sid=cookie" + R, "cookie" + R),
    ("X-Auth-Token", "tok" + R, "tok" + R),
    ("authorization", "Basic " + "YWRtaW46c2VjcmV0UGFzc3dvcmQ=", "secretPassword"),
])
def test_header_values_echoed_in_a_body_are_scrubbed(header: str, value: str,
                                                     echo: str) -> None:
    assert redact_headers([(header, value)])[header.lower()].startswith("<redacted")
    body = {"echo": f"you sent {echo}"}
    assert echo not in json.dumps(redact_json(body))


def test_argv_credential_flags_and_url_passwords() -> None:
    argv = ["process", "--openai.base_url", "http://admin:" + "Pw" + R + "@host/v1",
            "--env.judge_token", "J" + R, "--env.other=ok", "--x.api_key=K" + R]
    redacted = redact_argv(argv)
    assert R not in " ".join(redacted)
    assert redacted[0] == "process" and "--env.other=ok" in redacted
    assert len(list(scan_command(argv))) == 3
    assert list(scan_command(redacted)) == []


def _sse(pieces: list[str]) -> str:
    events = []
    for piece in pieces:
        chunk = {"id": "c", "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": piece}}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
    return "".join(events) + "data: [DONE]\n\n"


def test_a_key_split_across_stream_chunks_is_cut_from_every_piece() -> None:
    from hermes_replay._session.convert import stored_response
    from hermes_replay._session.intercept import WireResponse

    key = SHAPED["openai"]
    pieces = ["Your key: ", key[:6], key[6:15], key[15:], " done"]
    wire = WireResponse(200, [("content-type", "text/event-stream")],
                        chunks=[_sse(pieces).encode()])
    stored = stored_response(wire)
    text = "".join(stored["chunks"])
    for part in (key[:6] + key[6:9], key[6:15], key[15:]):
        assert part not in text
    deltas = [json.loads(c[6:])["choices"][0]["delta"]["content"]
              for c in stored["chunks"] if c.startswith("data: {")]
    assert "".join(deltas) == "Your key: <redacted:openai-key> done"
    assert list(scan_value({"chunks": [_sse(pieces)]}))  # verify joins the deltas too
    assert list(scan_value(stored)) == []


def test_credential_fields_inside_stream_chunks() -> None:
    from hermes_replay._session.convert import stored_response
    from hermes_replay._session.intercept import WireResponse

    raw = ('data: {"choices": [], "api_key": "Val' + R + '"}\n\n'
           'data: {"choices": [], "debug": "{\\"api-key\\": \\"Val' + R + '\\"}"}\n\n')
    stored = stored_response(WireResponse(200, [], chunks=[raw.encode()]))
    assert R not in "".join(stored["chunks"])


# -- verify finds, at file:line, each case the probe planted by hand -------------------------

@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "sample.jsonl"
    record_sample(path, rollouts=1, turns=2)
    return path


def _plant(records: list[dict[str, Any]], where: str) -> int:
    inter = next(r for r in records if r["type"] == "interaction")
    body, line = inter["request"]["body"], line_of(records, lambda r: r is inter)
    if where == "jwt in a message":
        body["messages"][-1]["content"] += " token " + SHAPED["jwt"]
    elif where == "groq key in a reply":
        inter["response"]["body"]["choices"][0]["message"]["content"] = SHAPED["groq"]
    elif where == "aws_secret_access_key field":
        body["aws_secret_access_key"] = AWS_SECRET
    elif where == "private_token field":
        body["metadata"] = {"private_token": "Val" + R}
    elif where == "database url in a tool result":
        body["messages"].append({"role": "tool", "content": SHAPED["database url"]})
    elif where == "userinfo in the command":
        records[0]["command"] = ["process", "--openai.base_url", "http://u:Pw" + R + "@h/v1"]
        line = 1
    elif where == "judge token flag":
        records[0]["command"] = ["process", "--env.judge_token", "J" + R]
        line = 1
    return line


@pytest.mark.parametrize("where", ["jwt in a message", "groq key in a reply",
                                   "aws_secret_access_key field", "private_token field",
                                   "database url in a tool result", "userinfo in the command",
                                   "judge token flag"])
def test_verify_finds_each_probe_case_at_its_line(sample: Path, tmp_path: Path,
                                                  where: str) -> None:
    records = copy.deepcopy(read_records(sample))
    line = _plant(records, where)
    path = tmp_path / "planted.jsonl"
    write_records(path, records)
    secrets = [f for f in verify_file(path) if f.kind == "secret"]
    assert secrets and {f.line for f in secrets} == {line}, [f.describe() for f in secrets]


def test_the_faster_rule_patterns_find_exactly_what_the_plain_ones_find() -> None:
    """``_NAMED``'s name run is possessive and ``_BASE64_RUN`` skips starts inside a run:
    both only save backtracking. Checked against the plain patterns on random text made of
    the characters that matter (names longer than the 80-character cap included)."""
    import random
    import re

    from hermes_replay._secrets import rules

    plain = {
        rules._NAMED: re.compile(rules._NAMED.pattern.replace("{0,79}+", "{0,79}")),
        rules._BASE64_RUN: re.compile(rules._BASE64_RUN.pattern.replace(
            "(?<![A-Za-z0-9/+])", "")),
    }
    assert all(p.pattern != q.pattern for p, q in plain.items())  # the forms differ
    pieces = [*"aZ09_.-\\\"' \t:=\n/+@?&", "token", "api_key", "secret", "x" * 85,
              "A1b2" * 12, "=" * 2, "Bearer ", "\\\""]
    rng = random.Random(27)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        for fast, slow in plain.items():
            assert [m.span() for m in fast.finditer(text)] == \
                [m.span() for m in slow.finditer(text)], text
