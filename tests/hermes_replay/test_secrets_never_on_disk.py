"""Property, at scale: whatever secret is planted wherever a recorder writes, after recording
no file holds it and ``verify`` finds nothing.

Each example records one cassette over real loopback HTTP (httpx) plus a tool call through
``hermes_replay.tool_call`` and header fields, with 1–6 plants. A plant is a secret of one
family — every provider shape the rules know, and a plain random token that only a *name*
or *knowing the value* can give away — put in one position: request header, query parameter
(any credential spelling, percent-encoded), URL user-info, body field (nested, or as JSON
text inside a string), message text, response header, JSON field, text body, a 401 body
echoing the key, an SSE stream split at random points, a tool's output, the recorded argv.
Plain tokens go only where a name or a known value marks them (an ``…_API_KEY`` variable of
the process, as a tool printing its environment would show).

Checked in every file under the cassette's folder: the raw, percent-encoded, JSON-escaped
and Basic-auth forms of every plant; and ``verify`` (which joins streamed deltas) finds 0.
``HERMES_SECRET_EXAMPLES`` sets the example count (default 120; docs/reliability.md states
the count of the last large run).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from _loopback_app import LoopbackApp
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hermes_replay
from hermes_replay._cassette.verify import verify_file
from hermes_replay._secrets.known import KNOWN, encoded_forms

EXAMPLES = int(os.environ.get("HERMES_SECRET_EXAMPLES", "120"))
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
ENV_VAR = "HYPO_PROVIDER_API_KEY"


def _chars(n: int, m: int, alphabet: str = ALNUM) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=m)


# Every family the rules know by shape. A fixed distinctive stem after the prefix keeps a
# shrunk example from matching unrelated bytes.
FAMILIES: dict[str, st.SearchStrategy[str]] = {
    "openai": st.builds(lambda p, b: f"sk-{p}Qz7{b}", st.sampled_from(["", "proj-", "svcacct-"]),
                        _chars(20, 40)),
    "anthropic": _chars(30, 60).map(lambda b: "sk-ant-api03-Qz7" + b),
    "google": _chars(33, 36).map(lambda b: "AIzaQz7" + b),
    "huggingface": _chars(30, 36).map(lambda b: "hf_Qz7" + b),
    "github": st.one_of(_chars(33, 36).map(lambda b: "ghp_Qz7" + b),
                        _chars(60, 80, ALNUM + "_").map(lambda b: "github_pat_Qz7" + b)),
    "gitlab": _chars(20, 24).map(lambda b: "glpat-Qz7" + b),
    "slack": _chars(20, 40).map(lambda b: "xoxb-1234-Qz7" + b),
    "stripe": _chars(24, 40).map(lambda b: "sk_live_Qz7" + b),
    "groq": _chars(40, 52).map(lambda b: "gsk_Qz7" + b),
    "aws-id": _chars(13, 13, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567").map(lambda b: "AKIAQZ7" + b),
    "jwt": st.builds(lambda a, b, c: f"eyJhbGciOiJIUzI1NiJ9.eyJQz7{a}.{b}{c}", _chars(12, 30),
                     _chars(8, 30), _chars(0, 10)),
    "pem": _chars(40, 80).map(lambda b: "-----BEGIN PRIVATE KEY-----\nMIIQz7" + b
                              + "\n-----END PRIVATE KEY-----"),
}
PLAIN = _chars(18, 32).map(lambda b: "Qz7" + b)  # no shape: only a name or knowing it helps
CREDENTIAL_NAMES = ["api_key", "x_token", "private_token", "api_token", "access-key", "jwt",
                    "bearer", "X-Amz-Security-Token", "aws_secret_access_key", "passphrase",
                    "credential", "client_secret", "judge_token", "secretAccessKey", "password"]

NAMED_POSITIONS = ["req header x-api-key", "req header authorization", "req cookie",
                   "req header x-auth-token", "query", "url userinfo", "body field",
                   "body nested", "body json text", "resp header", "resp field",
                   "resp json text", "argv flag", "header field", "req multipart"]
FREE_POSITIONS = ["message", "tool argument", "resp content", "resp text", "resp 401",
                  "sse split", "tool output", "argv url", "header note",
                  # the request's key (so known), echoed by the endpoint in disguise
                  "resp base64 echo", "resp hex echo", "resp halves echo",
                  "resp latin1 401 echo"]


@st.composite
def plants(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """1–6 plants: (position, secret, credential name)."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        named = draw(st.booleans())
        where = draw(st.sampled_from(NAMED_POSITIONS if named else FREE_POSITIONS))
        family = draw(st.sampled_from(sorted(FAMILIES)))
        if named and where not in ("url userinfo",) and draw(st.booleans()):
            secret = draw(PLAIN)
        else:
            secret = draw(FAMILIES[family])
        if where == "url userinfo" or "header" in where or "cookie" in where \
                or where.endswith("echo"):  # echoes send it as the request's key
            secret = secret.replace("\n", " ")  # a URL or a header value holds no newline
        out.append((where, secret, draw(st.sampled_from(CREDENTIAL_NAMES))))
    return out


class PlanServer(LoopbackApp):
    """Answers each request with the next planned response (status, headers, body/chunks)."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        with self.lock:
            plan = self.queue.pop(0)
        if "chunks" in plan:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for chunk in plan["chunks"]:
                await resp.write(chunk.encode())
            await resp.write_eof()
            return resp
        body = plan["raw"] if "raw" in plan else plan["body"].encode()
        return web.Response(status=plan.get("status", 200), body=body,
                            headers={"Content-Type": plan.get("type", "application/json"),
                                     **plan.get("headers", {})})


def _reply(content: str = "ok", **extra: Any) -> dict[str, Any]:
    body = {"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}], **extra}
    return {"body": json.dumps(body)}


def _sse(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    events = []
    for a, b in itertools.pairwise(bounds):
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": {"content": text[a:b]}}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
    return [*events, "data: [DONE]\n\n"]


def _plant(where: str, secret: str, name: str, cuts: list[int], request: dict[str, Any],
           header: dict[str, Any]) -> dict[str, Any]:
    """Put one plant in the request being built; return the planned response."""
    body, headers, params = request["json"], request["headers"], request["params"]
    response = _reply()
    if where == "req header x-api-key":
        headers["X-Api-Key"] = secret
    elif where == "req header authorization":
        headers["Authorization"] = f"Bearer {secret}"
    elif where == "req cookie":
        headers["Cookie"] = f"sid={secret}; theme=dark"
    elif where == "req header x-auth-token":
        headers["X-Auth-Token"] = secret
    elif where == "query":
        params[name] = secret
    elif where == "url userinfo":
        request["userinfo"] = f"admin:{quote(secret, safe='')}@"
    elif where == "body field":
        body[name] = secret
    elif where == "body nested":
        body["metadata"] = {"auth": {name: secret}}
    elif where == "body json text":
        body["messages"].append({"role": "tool", "content": json.dumps({name: secret})})
    elif where == "message":
        body["messages"].append({"role": "user", "content": f"please use {secret} now"})
    elif where == "tool argument":
        body["messages"].append({"role": "assistant", "content": None, "tool_calls": [{
            "id": "t1", "type": "function", "function": {
                "name": "login", "arguments": json.dumps({"note": f"k={secret}"})}}]})
    elif where == "resp header":
        response["headers"] = {"X-Api-Key": secret}
    elif where == "resp field":
        response = _reply(debug={name: secret})
    elif where == "resp json text":
        response = _reply(content=json.dumps({name: secret}))
    elif where == "resp content":
        response = _reply(content=f"Your key is {secret}, keep it safe.")
    elif where == "resp text":
        response = {"body": f"upstream said: {secret} rejected", "type": "text/plain"}
    elif where == "resp 401":
        response = {"status": 401, "body": json.dumps({"error": {
            "message": f"Incorrect API key provided: {secret}."}})}
    elif where == "sse split":
        response = {"chunks": _sse(f"Here: {secret} (done)", cuts)}
    elif where == "tool output":
        request["tool_output"] = f"HOME=/root\0{ENV_VAR}={secret}\0PATH=/bin"
    elif where == "argv flag":
        header["command"] += [f"--env.{name.replace('-', '_')}", secret]
    elif where == "argv url":
        header["command"] += ["--openai.base_url", f"http://u:{quote(secret, safe='')}@h/v1"]
    elif where == "header field":
        header[name] = secret
    elif where == "header note":
        header["note"] = f"recorded with {secret}"
    elif where == "req multipart":
        request["multipart"] = {name: secret, "purpose": "upload"}
    elif where.endswith("echo"):
        headers["Authorization"] = f"Bearer {secret}"
        raw = secret.encode()
        if where == "resp base64 echo":  # alone, and inside encoded JSON (any alignment)
            doc = json.dumps({"api_key": secret}).encode()
            response = _reply(content=f"{base64.b64encode(raw).decode()} "
                              f"{base64.urlsafe_b64encode(b'[' + doc).decode()}")
        elif where == "resp hex echo":
            response = _reply(content=f"key={raw.hex()}")
        elif where == "resp halves echo":
            half = len(secret) // 2 if " " not in secret else len(secret)  # a PEM: whole
            response = _reply(content=f"{secret[:half]} and then {secret[half:]}")
        else:  # a Latin-1 error page: not UTF-8, stored as base64
            response = {"status": 401, "type": "text/plain; charset=iso-8859-1",
                        "raw": f"Cl\u00e9 refus\u00e9e : {secret}".encode("latin-1")}
    return response


def _forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), json.dumps(secret)[1:-1],
            base64.b64encode(f"admin:{secret}".encode()).decode(), *encoded_forms(secret),
            # either half of a key split in two (each holds 8+ of its own characters), when
            # it looks random (a digit, or both cases): a half that reads as a word
            # (``AAAAAAAAAA`` of a shrunk example) is left, as ordinary data is
            *(half for half in (secret[:len(secret) // 2], secret[len(secret) // 2:])
              if " " not in secret and _random_looking(half))}


def _random_looking(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and (any(c.isdigit() for c in text) or (
        any(c.isupper() for c in letters) and any(c.islower() for c in letters)))


def _leaks(root: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():  # and a base64 body (not UTF-8) decoded, as a reader would
            data = path.read_bytes().decode("utf-8", "replace")
            data += "".join(base64.b64decode(b).decode("latin-1")
                            for b in re.findall(r'"base64": ?"([A-Za-z0-9+/=]*)"', data))
            found += [f"{path.name}: {s[:10]}…" for s in secrets for f in _forms(s) if f in data]
    return found


@pytest.fixture(scope="module")
def server():
    with PlanServer() as srv:
        yield srv


def _record(server: PlanServer, items: list[tuple[str, str, str]], cuts: list[int]) -> None:
    root = Path(tempfile.mkdtemp(prefix="never-on-disk-"))
    plain_known = [s for w, s, _ in items if w in ("tool output", "resp 401", "resp text",
                                                     "message", "resp content", "sse split",
                                                     "tool argument", "argv url", "header note")]
    try:
        with KNOWN.scope():
            # known values: what a recorder knows is secret is scrubbed wherever it shows up
            os.environ[ENV_VAR] = plain_known[0] if plain_known else "unused-Qz7-value-123"
            header: dict[str, Any] = {"command": ["process", "--env.total_steps", "1"]}
            requests = []
            for where, secret, name in items:
                request: dict[str, Any] = {"json": {"model": "m", "messages": [
                    {"role": "user", "content": "hi"}]}, "headers": {}, "params": {}}
                server.queue.append(_plant(where, secret, name, cuts, request, header))
                requests.append(request)
            path = root / "c.jsonl"
            with hermes_replay.cassette(path, "record", header=header), \
                    hermes_replay.rollout("r0"), httpx.Client() as client:
                for request in requests:
                    if "tool_output" in request:
                        hermes_replay.tool_call("terminal", {"command": "cat /proc/self/environ"},
                                                lambda r=request: r["tool_output"])
                    url = f"http://{request.get('userinfo', '')}127.0.0.1:{server.port}" \
                          "/v1/chat/completions"
                    if "multipart" in request:
                        client.post(url, data=request["multipart"], headers=request["headers"],
                                    files={"file": ("a.bin", b"\xff\x00 binary")},
                                    params=request["params"])
                    else:
                        client.post(url, json=request["json"], headers=request["headers"],
                                    params=request["params"])
        secrets = [s for w, s, _ in items] + ([os.environ[ENV_VAR]] if plain_known else [])
        assert _leaks(root, secrets) == [], items
        findings = [f.describe() for f in verify_file(path)]
        assert findings == [], (items, findings)
    finally:
        os.environ.pop(ENV_VAR, None)
        server.queue.clear()
        shutil.rmtree(root, ignore_errors=True)


RUNS = {"examples": 0, "plants": 0}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(items=plants(), cuts=st.lists(st.integers(0, 400), min_size=1, max_size=6))
def test_no_planted_secret_reaches_disk_and_verify_finds_nothing(
        server: PlanServer, items: list[tuple[str, str, str]], cuts: list[int]) -> None:
    _record(server, items, cuts)
    RUNS["examples"] += 1
    RUNS["plants"] += len(items)


def test_report_the_count() -> None:
    """Printed with ``-s`` (docs/reliability.md quotes a large run)."""
    print(f"\nsecrets property: {RUNS['examples']} recordings, {RUNS['plants']} plants, "
          "0 reached disk")


@pytest.mark.parametrize("where", NAMED_POSITIONS + FREE_POSITIONS)
def test_every_position_once(server: PlanServer, where: str) -> None:
    """Each position at least once with a plain token where a name allows it, else a key."""
    secret = "Qz7" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7" if where in NAMED_POSITIONS and \
        where != "url userinfo" else "sk-proj-Qz7" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"
    _record(server, [(where, secret, "private_token")], [9, 17])


def test_a_keys_random_looking_half_is_scrubbed_when_its_tail_is_plain(
        server: PlanServer) -> None:
    """The example the property found in some runs (CI, 2026-12-06): a key whose body ends in
    ``AAAAAAAA`` had no tail anchor, so its half ``22AAAAAAAA`` echoed in a reply reached
    disk. Kept as a fixed case: which examples the property draws varied between runs."""
    _record(server, [("resp halves echo", "AKIAQZ722222AAAAAAAA", "api_key")], [0])
