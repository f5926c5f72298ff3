"""A live judge that misbehaves, and what a live call may carry (issue 36: findings 04, 07,
17, 20, and 05/06 where a live judge's key lands in what a re-scoring writes).

- 04: a judge that answers once, then goes silent: each live call has a deadline
  (``--live-timeout``, default 120 s), and missing it fails the run at once.
- 07: a judge answering ``200 text/html``: the env falls back to its keyword score, so the
  run must fail (exit 1) and write no rescored cassette.
- 17: the env's credential headers (``x-auth-token``, ``cookie``, ``x-goog-api-key``, a custom
  ``x-judge-secret``) never reach the live endpoint, nor a credential in its query.
- 20: a credential in ``--live-base-url`` is refused before anything runs (it would be printed
  and written); a base URL's query stays after the joined path.
- 05/06: the judge echoing the key base64-encoded, in halves, or in a Latin-1 body: nothing
  written (rescored cassette, report, logs) holds any form of it.

The shipped research_judge_env cassette is replayed through the CLI, its judge's calls sent to
a judge on 127.0.0.1 that the test controls.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import time
from pathlib import Path

import pytest
from _loopback_app import LoopbackApp
from aiohttp import web
from conftest import trust

from hermes_replay._secrets.known import KNOWN, encoded_forms
from hermes_replay._session.intercept import WireRequest
from hermes_replay._session.live_calls import LiveCalls
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
ENV = "research_judge_env"
CASSETTE = f"cassettes/{ENV}/probe-known-good.jsonl"
KEY_VAR = "HERMES_TEST_JUDGE_KEY"
KEY = "judgekey-7f3a9c1e5b2d4086aa11c0ffee"
ENV_SECRETS = {"x-auth-token": "authtok-Qz7e9d1c3b5a7f9e1d3c5",
               "cookie": "session=cookieval-Qz7a1b2c3d4e5f6a7b8",
               "x-goog-api-key": "googval-Qz7f0e1d2c3b4a5968778",
               "x-judge-secret": "judgesecret-Qz7c0ffee1234abcd"}


class _Judge(LoopbackApp):
    """A chat-completions judge: ``mode`` says how it answers; every request's path, query and
    headers are kept."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.closing = False

    def __exit__(self, *exc: object) -> None:
        self.closing = True  # a silent call ends, so the server can stop
        super().__exit__(*exc)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_route("POST", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.requests.append((request.path, request.query_string, dict(request.headers)))
        if self.mode == "html":
            return web.Response(text="<!doctype html><html><body>Sign in</body></html>",
                                content_type="text/html")
        if self.mode == "silent-after-one" and len(self.requests) > 1:
            while not self.closing:  # silent, for as long as the test runs
                await asyncio.sleep(0.05)
        content = json.dumps({"score": 7, "reason": "fine"})
        charset = "utf-8"
        if self.mode == "echo":  # a careless proxy: the key, disguised, in every answer
            raw = KEY.encode()
            content = json.dumps({"score": 7, "reason": (
                f"b64 {base64.b64encode(raw).decode()} hex {raw.hex()} "
                f"json {base64.b64encode(json.dumps({'api_key': KEY}).encode()).decode()} "
                f"halves {KEY[:17]} ... {KEY[17:]} cl\u00e9 {KEY}")})
            charset = "iso-8859-1"  # not UTF-8: stored as base64, scrubbed first
        body = json.dumps({
            "id": "chatcmpl-judge", "object": "chat.completion", "created": 1,
            "model": "judge", "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }, ensure_ascii=False).encode(charset)
        return web.Response(body=body, headers={
            "Content-Type": f"application/json; charset={charset}"})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    (tmp_path / "environments").mkdir()
    shutil.copy(ROOT / "environments" / f"{ENV}.py", tmp_path / "environments" / f"{ENV}.py")
    (tmp_path / "cassettes" / ENV).mkdir(parents=True)
    shutil.copy(ROOT / CASSETTE, tmp_path / CASSETTE)
    trust(tmp_path)  # the user's own project, trusted as after `hermes-replay trust`
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_VAR, KEY)
    return tmp_path


def _live(base_url: str, *extra: str) -> list[str]:
    return ["replay", CASSETTE, "--out", "out", "-j", "1", "--llm", "live=reward",
            "--live-base-url", base_url, "--live-api-key-env", KEY_VAR, *extra]


def _traces(text: str, secret: str) -> list[str]:
    found = [form for form in [secret, *encoded_forms(secret)] if form in text]
    return found + [secret[i:i + 8] for i in range(len(secret) - 7)
                    if secret[i:i + 8] in text]


def _written_traces(root: Path, secret: str) -> dict[str, list[str]]:
    return {str(p): t for p in root.rglob("*") if p.is_file()
            and (t := _traces(p.read_bytes().decode("latin-1"), secret))}


# ----------------------------------------------------------------------------- 04 and 07


def test_a_judge_that_goes_silent_after_answering_stops_the_run_at_its_deadline(
        project: Path, capsys) -> None:
    with _Judge("silent-after-one") as judge:
        started = time.monotonic()
        code = main(_live(judge.base_url, "--live-timeout", "3", "--no-report"))
        took = time.monotonic() - started
        asked = len(judge.requests)
    err = capsys.readouterr().err
    assert code == 1, err
    assert asked >= 2, err  # it answered once, then a call hung
    assert took < 45, took  # the deadline, not atroposlib's 1,200 s and retries
    assert "within 3 s" in err and "--live-timeout" in err and "next step" in err, err
    assert not list(Path("out").rglob("*.rescored*.jsonl"))


def test_a_judge_answering_html_fails_the_run_and_writes_nothing_rescored(
        project: Path, capsys) -> None:
    with _Judge("html") as judge:
        code = main(_live(judge.base_url, "--no-report"))
        assert judge.requests  # the judge was asked
    err = capsys.readouterr().err
    assert code == 1, err
    assert "text/html" in err and "not the API's JSON" in err and CASSETTE in err, err
    assert not list(Path("out").rglob("*.rescored*.jsonl"))


def test_live_timeout_must_be_a_positive_number(project: Path, capsys) -> None:
    assert main(_live("http://127.0.0.1:9/v1", "--live-timeout", "0")) == 2
    assert "--live-timeout 120" in capsys.readouterr().err
    assert main(["replay", CASSETTE, "--live-timeout", "5"]) == 2
    assert "--llm live=PATTERN" in capsys.readouterr().err


# ----------------------------------------------------------------------------- 05/06 live


def test_a_judge_echoing_the_key_in_disguise_leaves_it_nowhere(project: Path, capsys) -> None:
    """The rescored cassette, the report, replay.json and the logs: no form of the key."""
    with _Judge("echo") as judge:
        code = main(_live(judge.base_url))
        sent = list(judge.requests)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert sent and all(h.get("Authorization") == f"Bearer {KEY}" for _, _, h in sent)
    rescored = Path("out/probe-known-good.rescored.jsonl")
    assert rescored.is_file() and Path("out/report.html").is_file()
    assert "<redacted" in rescored.read_text()
    assert _written_traces(project, KEY) == {}
    assert _traces(printed.out + printed.err, KEY) == []
    capsys.readouterr()
    with KNOWN.scope():
        assert main(["verify", str(rescored)]) == 0, capsys.readouterr().out


# ----------------------------------------------------------------------------- 17 and 20


def test_the_envs_credential_headers_and_query_never_reach_the_live_endpoint(
        tmp_path: Path) -> None:
    import openai

    import hermes_replay

    recorded = tmp_path / "plain.jsonl"
    messages = [{"role": "user", "content": "Answer to grade: 4. Score 0-10 as JSON."}]
    with _Judge("plain") as policy:
        client = openai.OpenAI(base_url=policy.base_url, api_key="sk-placeholder",
                               max_retries=0, default_headers=ENV_SECRETS,
                               default_query={"api_key": "querykey-Qz7a9b8c7d6e5f4"})
        with hermes_replay.cassette(recorded, "record"), hermes_replay.rollout("r-0"):
            client.chat.completions.create(model="judge", messages=messages)
        assert policy.requests[0][2]["x-judge-secret"] == ENV_SECRETS["x-judge-secret"]
    with _Judge("plain") as judge:
        live = LiveCalls.build({"patterns": ["model=judge"], "api_key_env": "K",
                                "base_url": judge.base_url + "?api-version=2024-06-01"},
                               {"K": KEY})
        with hermes_replay.cassette(recorded, "replay", live=live), \
                hermes_replay.rollout("r-0"):
            client.chat.completions.create(model="judge", messages=messages)
        [(path, query, headers)] = judge.requests
    assert headers["Authorization"] == f"Bearer {KEY}"
    sent = json.dumps(headers)
    for name, value in ENV_SECRETS.items():
        assert name not in {k.lower() for k in headers}
        assert value.split("=")[-1] not in sent
    assert "querykey" not in query
    # 20: the base URL's path, then the request's, then the base URL's query
    assert path == "/v1/chat/completions" and query == "api-version=2024-06-01"


def test_every_credential_header_name_the_recorder_knows_is_dropped() -> None:
    live = LiveCalls.build({"patterns": ["reward"], "base_url": "http://127.0.0.1:7/v1",
                            "api_key_env": "K"}, {"K": KEY})
    headers = [(name, value) for name, value in ENV_SECRETS.items()] + [
        ("Authorization", "Bearer placeholder"), ("Proxy-Authorization", "Basic eDp5"),
        ("X-Api-Key", "x"), ("api-key", "y"), ("Content-Type", "application/json"),
        ("X-Custom-Trace", "kept"), ("X-Note", "sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9")]
    out = live.outgoing(WireRequest("POST", "http://rec:1/v1/chat/completions?token=t&x=1"
                                    "&note=sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
                                    headers, b"{}"), ["/chat/completions"])
    assert [(k.lower(), v) for k, v in out.headers] == [
        ("content-type", "application/json"), ("x-custom-trace", "kept"),
        ("authorization", f"Bearer {KEY}")]
    assert out.url == "http://127.0.0.1:7/v1/chat/completions?x=1"  # no ?token= either


@pytest.mark.parametrize("url", [
    f"http://127.0.0.1:9/v1?api_key={KEY}",
    f"http://127.0.0.1:9/v1?key={KEY}",
    "http://127.0.0.1:9/v1?x=sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://127.0.0.1:9/Qz7a8d9f0e1c2b3a4d5e6f7a8b9c0d1e2/v1",
    "http://127.0.0.1:9/v1/sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    # trust round 5, finding 14: a key as a bare query name, a name with a value, in the
    # fragment, percent-encoded, after a ';'
    "http://127.0.0.1:9/v1?sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://127.0.0.1:9/v1?sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9=1",
    "http://127.0.0.1:9/v1#sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://127.0.0.1:9/v1#token=sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://127.0.0.1:9/v1/sk%2Dproj%2DQz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://127.0.0.1:9/v1?a=1;sk-proj-Qz7shapedKEY0a1b2c3d4e5f6g7h8i9",
    "http://Qz7user:Qz7shapedKEY0a1b2c3d4e5f6g7h8i9@127.0.0.1:9/v1",
])
def test_a_credential_in_the_live_base_url_is_refused_and_never_shown(
        project: Path, capsys, url: str) -> None:
    assert main(_live(url)) == 2
    printed = capsys.readouterr()
    assert "--live-api-key-env" in printed.err, printed.err
    assert "Qz7" not in printed.out + printed.err and KEY not in printed.out + printed.err
    assert not Path("out").exists()
