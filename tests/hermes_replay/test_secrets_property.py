"""Property: a key sent or received anywhere on the wire never reaches disk.

Hypothesis picks a secret (key-shaped — ``sk-…``, ``hf_…``, ``AIza…``, ``ghp_…`` — or a
plain random token) and a position: request headers, query string, body, URL user-info;
response headers, JSON body, text body, SSE stream; the openai SDK, httpx and aiohttp.
Each example is recorded through the real ``cassette(mode="record")`` against a loopback
server that echoes the secret where told; then every byte of every file written is grepped
for the secret (raw, URL-encoded and base64 forms), and ``verify`` must find nothing.

Plain random tokens are only put where a credential is named as one (an ``api_key``
field, an ``Authorization`` header, a ``token`` query parameter): in free text they are
indistinguishable from data, and no redactor can know.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import httpx
import openai
import pytest
from _reliability_helpers import EchoServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hermes_replay
from hermes_replay._cassette.verify import verify_file

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _body(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=ALNUM, min_size=min_size, max_size=max_size)


SHAPED = st.one_of(
    st.builds(lambda p, b: f"sk-{p}{b}", st.sampled_from(["", "proj-", "ant-", "or-v1-"]),
              _body(20, 48)),
    _body(30, 40).map(lambda b: "hf_" + b),
    _body(35, 39).map(lambda b: "AIza" + b),
    _body(36, 40).map(lambda b: "ghp_" + b),
)
# a distinctive prefix keeps a shrunk example ("0000…") from matching unrelated bytes
PLAIN = _body(16, 40).map(lambda b: "Qz7" + b)

# Positions where any secret must be caught, and those where only key-shaped ones can be.
NAMED_POSITIONS = [
    "sdk api_key", "req header api-key", "req header x-api-key", "req cookie",
    "query api_key", "query key", "query token", "query access_token", "body api_key",
    "body nested password", "url userinfo", "resp set-cookie", "resp header x-api-key",
    "resp body api_key", "resp body nested secret", "aiohttp header authorization",
    "aiohttp body api_key",
]
SHAPED_POSITIONS = [
    "req custom header", "query other param", "body message", "body tool argument",
    "resp body content", "resp text body", "resp sse chunk", "resp custom header",
    "aiohttp body prompt", "httpx body message",
]


@pytest.fixture(scope="module")
def server():
    with EchoServer() as srv:
        yield srv


def _send(server: EchoServer, where: str, secret: str) -> None:
    """One LLM request with the secret at ``where`` (inside a rollout scope)."""
    base = f"http://127.0.0.1:{server.port}/v1"
    messages = [{"role": "user", "content": "hello"}]
    if where.startswith("aiohttp"):
        asyncio.run(_send_aiohttp(server, where, secret))
        return
    if where == "httpx body message":
        with httpx.Client() as client:
            client.post(base + "/chat/completions",
                        json={"model": "m", "messages": [{"role": "user", "content": secret}]})
        return
    api_key = secret if where == "sdk api_key" else "placeholder-key"
    headers: dict[str, str] = {}
    query: dict[str, str] = {}
    body: dict[str, Any] = {}
    if where == "req header api-key":
        headers["api-key"] = secret
    elif where == "req header x-api-key":
        headers["X-Api-Key"] = secret
    elif where == "req cookie":
        headers["Cookie"] = f"sid={secret}"
    elif where == "req custom header":
        headers["X-Trace"] = f"token {secret}"
    elif where.startswith("query"):
        name = where.split()[1] if where != "query other param" else "note"
        query[name] = secret
    elif where == "body api_key":
        body["api_key"] = secret
    elif where == "body nested password":
        body["metadata"] = {"auth": {"password": secret}}
    elif where == "body message":
        messages = [{"role": "user", "content": f"use the key {secret} please"}]
    elif where == "body tool argument":
        messages = [{"role": "user", "content": "go"},
                    {"role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_1", "type": "function", "function": {
                            "name": "login", "arguments": json.dumps({"key": secret})}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    if where == "url userinfo":
        base = f"http://user:{secret}@127.0.0.1:{server.port}/v1"
    client = openai.OpenAI(base_url=base, api_key=api_key, max_retries=0,
                           default_headers=headers or None, default_query=query or None)
    try:
        if where == "resp sse chunk":
            stream = client.chat.completions.create(model="m", messages=messages, stream=True)
            assert secret in "".join(c.choices[0].delta.content or "" for c in stream)
        elif where == "resp text body":
            raw = client.chat.completions.with_raw_response.create(model="m", messages=messages)
            assert secret in raw.http_response.text
        else:
            client.chat.completions.create(model="m", messages=messages,
                                           extra_body=body or None)
    finally:
        client.close()


async def _send_aiohttp(server: EchoServer, where: str, secret: str) -> None:
    url = f"http://127.0.0.1:{server.port}/generate"
    headers = {"Authorization": f"Bearer {secret}"} if where.endswith("authorization") else {}
    payload: dict[str, Any] = {"text": "hi", "sampling_params": {}}
    if where.endswith("api_key"):
        payload["api_key"] = secret
    elif where.endswith("prompt"):
        payload["text"] = f"the key is {secret}"
    async with aiohttp.ClientSession() as session, \
            session.post(url, json=payload, headers=headers) as resp:
        await resp.read()


def _leaks(root: Path, secret: str) -> list[str]:
    forms = {secret, quote(secret, safe=""),
             base64.b64encode(f"user:{secret}".encode()).decode()}
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}: {form[:8]}…" for form in forms if form.encode() in data]
    return found


def _record_and_check(server: EchoServer, where: str, secret: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="secrets-"))
    try:
        server.plan = (where, secret)
        path = root / "c.jsonl"
        with hermes_replay.cassette(path, "record") as session:
            with hermes_replay.rollout("r0"):
                _send(server, where, secret)
        assert session.summary().recorded == 1, where
        assert _leaks(root, secret) == [], f"{where}: the secret reached disk"
        assert [f.describe() for f in verify_file(path)] == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@SETTINGS
@given(where=st.sampled_from(NAMED_POSITIONS), secret=st.one_of(SHAPED, PLAIN))
def test_any_secret_in_a_credential_position_never_reaches_disk(server: EchoServer,
                                                                where: str, secret: str) -> None:
    _record_and_check(server, where, secret)


@SETTINGS
@given(where=st.sampled_from(SHAPED_POSITIONS), secret=SHAPED)
def test_key_shaped_secret_anywhere_never_reaches_disk(server: EchoServer, where: str,
                                                       secret: str) -> None:
    _record_and_check(server, where, secret)


@pytest.mark.parametrize("where", NAMED_POSITIONS + SHAPED_POSITIONS)
def test_every_position_once(server: EchoServer, where: str) -> None:
    """Each position at least once, whatever hypothesis draws (a readable failure too)."""
    _record_and_check(server, where, "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8")
