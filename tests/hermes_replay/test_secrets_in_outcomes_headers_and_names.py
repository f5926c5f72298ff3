"""Secrets are scrubbed from what rollouts report, from header fields, and under every
credential name spelling.

- What a rollout *reports* (``scope.report(messages=…)``, as every environment does) is
  written as an outcome record without redaction: a key the model echoed is redacted in the
  response record and then written in clear in the outcome's final messages.
- Header fields (``cassette(header=…)``, ``annotate(…)``) are written without redaction.
- Credential names beyond the exact list (``refresh_token``, ``session_token``,
  ``private_key``, ``openai_api_key`` in a body; ``auth_token``, ``refresh_token`` in a
  query) keep their values.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import openai
import pytest
from _reliability_helpers import EchoServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_secrets_property import PLAIN, SHAPED, _leaks

import hermes_replay


@pytest.fixture(scope="module")
def server():
    with EchoServer() as srv:
        yield srv


def _reply_through_env_flow(server: EchoServer, secret: str, root: Path) -> Path:
    """Record one rollout whose model reply echoes the key, and report the final messages
    the way ``HermesAgentBaseEnv`` does."""
    server.plan = ("resp body content", secret)
    path = root / "c.jsonl"
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="x",
                           max_retries=0)
    with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r0") as scope:
        messages = [{"role": "user", "content": "what was the key?"}]
        reply = client.chat.completions.create(model="m", messages=messages)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        scope.report(reward=1.0, turns_used=1, messages=messages)
    client.close()
    return path


def test_outcome_messages_are_redacted(server: EchoServer, tmp_path: Path) -> None:
    secret = "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"
    _reply_through_env_flow(server, secret, tmp_path)
    assert _leaks(tmp_path, secret) == []


def test_header_and_annotations_are_redacted(tmp_path: Path) -> None:
    secret = "sk-proj-" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
    path = tmp_path / "c.jsonl"
    with hermes_replay.cassette(path, "record", header={
            "command": ["process", "--openai.api_key", secret],
            "base_url": f"http://127.0.0.1:1/v1?key={secret}"}):
        hermes_replay.annotate(note=f"debug key {secret}")
    assert _leaks(tmp_path, secret) == []


BODY_NAMES = ["refresh_token", "session_token", "private_key", "openai_api_key", "passwd",
              "api_key", "apiKey", "client_secret"]
QUERY_NAMES = ["auth_token", "refresh_token", "session_token", "api_key", "key", "sig"]


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(["body", "query"]), index=st.integers(0, 5),
       secret=st.one_of(PLAIN, SHAPED))
def test_credential_names_keep_no_value(server: EchoServer, place: str, index: int,
                                        secret: str) -> None:
    names = BODY_NAMES if place == "body" else QUERY_NAMES
    name = names[index % len(names)]
    root = Path(tempfile.mkdtemp(prefix="secret-names-"))
    try:
        server.plan = ("", "")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="x",
                               max_retries=0,
                               default_query={name: secret} if place == "query" else None)
        with hermes_replay.cassette(root / "c.jsonl", "record"), hermes_replay.rollout("r0"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}],
                extra_body={name: secret} if place == "body" else None)
        client.close()
        assert _leaks(root, secret) == [], f"{place} field {name!r} kept its value"
    finally:
        shutil.rmtree(root, ignore_errors=True)
