"""A known key in disguise, a key in a body that is not UTF-8, a key in a multipart form
(issue 36: findings 05, 06 and 21).

- 05: a Latin-1 401 page echoing the key was stored as base64, unredacted, and neither
  ``verify`` nor ``show --raw`` looked inside it.
- 06: the known key base64-, base64url- or hex-encoded (alone, or inside base64 of JSON at
  any byte alignment), or printed in two halves, was written as it came.
- 21: a multipart form field ``api_key`` was recorded raw, while ``verify`` flagged the
  multipart boundary as a high-entropy token (and ``show`` then refused).

Each case goes through what a user runs: recording over real loopback HTTP, then the
``verify`` and ``show`` commands; every file under the cassette's folder is searched for the
key in all its forms.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import httpx
import pytest
from _loopback_app import LoopbackApp
from aiohttp import web

import hermes_replay
from hermes_replay import load_cassette
from hermes_replay._cassette import write_cassette
from hermes_replay._secrets.known import KNOWN, encoded_forms
from hermes_replay._secrets.redact import redact_text, scrub
from hermes_replay._secrets.stream import ScrubbingStream
from hermes_replay.cli import main

# a key no shape rule knows: only knowing it (the recorder's Authorization) finds it
KEY = "Qz7plainKEYvalue0a1b2c3d4e5f6g7h8"
SHAPED = "sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9"  # found by its shape, known or not


def _disguises(key: str) -> dict[str, str]:
    """The key as a reply may carry it: encoded whole, inside encoded JSON at each of the
    three byte alignments, and split in two halves."""
    raw = key.encode()
    doc = json.dumps({"api_key": key}).encode()
    half = len(key) // 2
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "base64 json": base64.b64encode(doc).decode(),
        "base64 json +1": base64.b64encode(b"[" + doc).decode(),
        "base64 json +2": base64.b64encode(b"[ " + doc).decode(),
        "base64url json": base64.urlsafe_b64encode(b"  " + doc).decode(),
        "halves": f"first {key[:half]} and later, {key[half:]}.",
        "uneven split": f"{key[:9]}\n...\n{key[9:]}",
    }


def _traces(text: str, key: str) -> list[str]:
    """Forms of ``key`` (or a run of 8+ of its characters) still in ``text``."""
    found = [form for form in [key, *encoded_forms(key)] if form in text]
    found += [key[i:i + 8] for i in range(len(key) - 7) if key[i:i + 8] in text]
    return found


def _files_with_traces(root: Path, key: str) -> dict[str, list[str]]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            traces = _traces(path.read_bytes().decode("latin-1"), key)
            if traces:
                out[str(path)] = traces
    return out


class _EchoServer(LoopbackApp):
    """Answers with the planned (status, content-type, body bytes), one per request, and
    keeps every request body it got."""

    def __init__(self, plan: list[tuple[int, str, bytes]]) -> None:
        super().__init__()
        self.plan = list(plan)
        self.bodies: list[bytes] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        status, content_type, body = self.plan.pop(0)
        return web.Response(status=status, body=body, headers={"Content-Type": content_type})


# ----------------------------------------------------------------------------- 06: the rules


@pytest.mark.parametrize("how", list(_disguises(KEY)))
def test_a_known_key_in_disguise_is_scrubbed(how: str) -> None:
    text = _disguises(KEY)[how]
    with KNOWN.scope():
        assert _traces(text, KEY)  # the disguise really carries the key
        KNOWN.add(KEY, "api-key")
        clean = redact_text(text)
        assert "<redacted:api-key>" in clean
        assert _traces(clean, KEY) == []
        assert scrub({"content": text}) == {"content": clean}
        assert redact_text(clean) == clean  # idempotent


def test_pieces_and_encodings_leave_ordinary_text_alone() -> None:
    """Pieces are sought only for key-like values, and no piece under 8 characters is cut:
    a path known as a secret does not eat every path that shares a folder with it."""
    text = "see /home/user/.cache/huggingface for the model; Qz7plai is a prefix, no more"
    with KNOWN.scope():
        KNOWN.add("/home/user/.cache/huggingface/token", "hf_token_path")
        KNOWN.add(KEY, "api-key")
        assert redact_text(text) == text


def test_an_env_printing_its_key_in_base64_shows_it_nowhere() -> None:
    """The terminal and the env log get what ``ScrubbingStream`` passes on."""
    sink = io.StringIO()
    with KNOWN.scope():
        KNOWN.add(KEY, "openai_api_key")
        stream = ScrubbingStream(sink)
        for text in _disguises(KEY).values():
            stream.write(f"debug: {text}\n")
        stream.drain()
    assert _traces(sink.getvalue(), KEY) == []
    assert sink.getvalue().count("<redacted:openai_api_key>") >= len(_disguises(KEY))


def test_a_reply_carrying_the_key_in_disguise_is_recorded_without_it(tmp_path: Path) -> None:
    replies = [json.dumps({"choices": [{"message": {"content": text}}]}).encode()
               for text in _disguises(KEY).values()]
    cassette = tmp_path / "disguise.jsonl"
    with KNOWN.scope(), _EchoServer([(200, "application/json", r) for r in replies]) as srv:
        with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("r-0"):
            for _ in replies:
                httpx.post(f"{srv.url}/v1/chat/completions", json={"model": "m"},
                           headers={"Authorization": f"Bearer {KEY}"})
    assert _files_with_traces(tmp_path, KEY) == {}
    assert len(load_cassette(cassette).interactions) == len(replies)


def test_verify_finds_a_known_key_in_disguise(tmp_path: Path, monkeypatch, capsys) -> None:
    """A cassette written before this rule (or by hand) holding the disguised key: ``verify``
    run where the key is known (its variable is set) names each line."""
    cassette = _recorded(tmp_path, [b'{"ok": true}'] * len(_disguises(KEY)))
    loaded = load_cassette(cassette)
    for inter, text in zip(loaded.interactions, _disguises(KEY).values(), strict=True):
        inter.response["body"] = {"choices": [{"message": {"content": text}}]}
    write_cassette(cassette, loaded.header, loaded.interactions, loaded.outcomes,
                   loaded.tool_calls)
    monkeypatch.setenv("HERMES_TEST_PROVIDER_API_KEY", KEY)
    assert main(["verify", str(cassette)]) == 1
    out = capsys.readouterr().out
    lines = {line.split(": secret:")[0] for line in out.splitlines() if ": secret:" in line}
    assert len(lines) == len(_disguises(KEY)), out
    assert KEY not in out and not _traces(out, KEY)


# ----------------------------------------------------------------------------- 05: not UTF-8


def _recorded(tmp_path: Path, bodies: list[bytes], status: int = 200,
              content_type: str = "application/json", key: str = KEY) -> Path:
    cassette = tmp_path / "cassettes" / "latin1.jsonl"
    plan = [(status, content_type, body) for body in bodies]
    with KNOWN.scope(), _EchoServer(plan) as srv:
        with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("r-0"):
            for _ in bodies:
                httpx.post(f"{srv.url}/v1/chat/completions", json={"model": "m"},
                           headers={"Authorization": f"Bearer {key}"})
    return cassette


@pytest.mark.parametrize("key", [KEY, SHAPED])
def test_a_latin1_401_echoing_the_key_is_scrubbed_before_encoding(
        tmp_path: Path, key: str, capsys) -> None:
    page = f"Cl\u00e9 API refus\u00e9e : {key} (r\u00e9essayez)".encode("latin-1")
    cassette = _recorded(tmp_path, [page], 401, "text/plain; charset=iso-8859-1", key)
    stored = load_cassette(cassette).interactions[0].response
    decoded = base64.b64decode(stored["base64"]).decode("latin-1")
    assert decoded.startswith("Cl\u00e9 API refus\u00e9e : <redacted")  # the rest intact
    assert decoded.endswith("(r\u00e9essayez)")
    assert _files_with_traces(tmp_path, key) == {}
    assert main(["verify", str(cassette)]) == 0, capsys.readouterr().out


def test_verify_and_show_look_inside_a_base64_body(tmp_path: Path, capsys) -> None:
    """A cassette that still holds the key in a base64 body (what the recorder wrote before):
    ``verify`` finds it, ``show --raw`` prints no form of it."""
    cassette = _recorded(tmp_path, [b"\xff placeholder"], 401, "text/plain")
    loaded = load_cassette(cassette)
    page = f"Cl\u00e9 refus\u00e9e : {SHAPED}".encode("latin-1")
    loaded.interactions[0].response["base64"] = base64.b64encode(page).decode()
    write_cassette(cassette, loaded.header, loaded.interactions, loaded.outcomes,
                   loaded.tool_calls)
    assert main(["verify", str(cassette)]) == 1
    out = capsys.readouterr().out
    assert "openai key" in out and "(decoded)" in out, out
    code = main(["show", str(cassette), "--raw"])
    shown = capsys.readouterr()
    assert code == 0, shown.err
    assert '"base64"' in shown.out and _traces(shown.out + shown.err, SHAPED) == []
    assert main(["show", str(cassette)]) == 0
    shown = capsys.readouterr()
    assert _traces(shown.out + shown.err, SHAPED) == []


# ----------------------------------------------------------------------------- 21: multipart


def test_a_multipart_credential_field_is_redacted_and_the_boundary_is_no_finding(
        tmp_path: Path, capsys) -> None:
    cassette = tmp_path / "cassettes" / "form.jsonl"
    reply = json.dumps({"choices": [{"message": {"content": "uploaded"}}]}).encode()
    with KNOWN.scope(), _EchoServer([(200, "application/json", reply)] * 2) as srv:
        with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("r-0"):
            for extra in (b"plain text", b"\xff\xfe binary part"):  # UTF-8 and not
                httpx.post(f"{srv.url}/v1/chat/completions",
                           data={"api_key": KEY, "purpose": "judge"},
                           files={"file": ("notes.bin", extra)})
        assert all(KEY.encode() in body for body in srv.bodies)  # it was sent
    assert _files_with_traces(tmp_path, KEY) == {}
    first = load_cassette(cassette).interactions[0].request
    assert "<redacted:api_key>" in first["body"] and 'name="purpose"' in first["body"]
    assert "boundary=" in first["headers"]["content-type"]
    assert main(["verify", str(cassette)]) == 0, capsys.readouterr().out
    assert main(["show", str(cassette)]) == 0, capsys.readouterr().err
