"""The secret families an adversarial probe got past ``record`` and ``verify`` (issue 25, item 7).

Each family is a way a credential appears in traffic: written with JSON escapes
(``\\u0073k-proj-…``) in a 401 or 200 body, as a YAML value indented under its name or under a
credential-named block, after a scheme word (``Authorization: Token X``), broken by a newline
or across SSE chunks, on a command line (``curl -u``, ``mysql -p``), in a netrc, as a bare AWS
secret key, or in one of the vendor key shapes. For each, hypothesis draws the random part;
recording it through the real session (request text, raw response bodies, SSE streams) must
leave none of it on disk, and ``verify`` must find it, at its line, in a cassette it was
planted in by hand.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from _reliability_helpers import EchoServer, line_of, read_records, record_sample, write_records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hermes_replay
from hermes_replay._cassette.verify import verify_file
from hermes_replay._secrets.rules import _bare_aws_secret

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdef"


def _text(alphabet: str, n: int) -> st.SearchStrategy[str]:
    # a digit at the end: a real key's random part has one, and prose (which the newline
    # rule must leave alone) does not
    return st.text(alphabet=alphabet, min_size=n - 1, max_size=n - 1).map(lambda b: b + "7")


# family -> (the random part, the text that carries it, what must never reach disk)
Carrier = Callable[[str], tuple[str, list[str]]]


def _whole(fmt: str) -> Carrier:
    return lambda b: (fmt.format(b=b), [b])


VENDOR: dict[str, tuple[str, int, str]] = {
    # name: (alphabet, length of the random part, format)
    "xai": (ALNUM, 80, "xai-{b}"),
    "perplexity": (ALNUM, 48, "pplx-{b}"),
    "nvidia": (ALNUM, 64, "nvapi-{b}"),
    "replicate": (ALNUM, 37, "r8_{b}"),
    "fireworks": (ALNUM, 24, "fw_{b}"),
    "pypi": (ALNUM, 60, "pypi-AgEIcHlwaS5vcmc{b}"),
    "npm": (ALNUM, 36, "npm_{b}"),
    "sendgrid": (ALNUM, 43, "SG.Ab1Cd2Ef3Gh4Ij5Kl6Mn7.{b}"),
    "digitalocean": (HEX, 64, "dop_v1_{b}"),
    "shopify": (HEX, 32, "shpat_{b}"),
    "telegram": (ALNUM, 33, "123456789:AA{b}"),
    "discord": (ALNUM, 38, "MTA1NjYyODc5MzQ1MjUzMzc2MA.GhJkLm.{b}"),
    "mailgun": (HEX, 32, "key-{b}"),
    "twilio": (HEX, 32, "SK{b}"),
    "databricks": (HEX, 32, "dapi{b}"),
    "square": (ALNUM, 60, "EAAA{b}"),
}
FAMILIES: dict[str, tuple[st.SearchStrategy[str], Carrier]] = {
    "json-escaped": (_text(ALNUM, 30), lambda b: (
        '{"error": {"message": "Incorrect API key provided: \\u0073k-proj-' + b
        + '", "type": "invalid_request_error"}}', [b])),
    "yaml-nested": (_text(ALNUM, 24), lambda b: (
        f"config:\n  openai:\n    api_key:\n      {b}\n  db:\n    password: {b[::-1]}x9\n",
        [b, b[::-1]])),
    "yaml-block": (_text(ALNUM, 24), _whole("secrets:\n  openai: {b}\n  other: x\n")),
    "scheme-token": (_text(ALNUM, 32), _whole("Authorization: Token {b}")),
    "newline-split": (_text(ALNUM, 30), lambda b: (
        f"key sk-proj-{b[:14]}\n{b[14:]} end", [b[:14], b[14:]])),
    "curl-user": (_text(ALNUM, 20), _whole("curl -u alice:{b} https://api.example.com/v1")),
    "mysql-password": (_text(ALNUM, 20), _whole("mysql -h db -u root -p{b} orders")),
    "netrc": (_text(ALNUM, 20), _whole("machine api.example.com login alice password {b}")),
    "aws-bare-secret": (
        st.text(alphabet=ALNUM + "/+", min_size=40, max_size=40).filter(_bare_aws_secret),
        _whole("aws_creds {b} (rotate)")),
    **{name: (_text(alphabet, n), _whole(fmt)) for name, (alphabet, n, fmt) in VENDOR.items()},
}
# Where the text travels. Request text and every raw response shape the recorder stores.
POSITIONS = ["request message", "resp raw 200", "resp raw 401", "resp sse split"]


def _forms(needle: str) -> list[str]:
    """How a leaked value could look on disk: as is, or JSON-escaped."""
    return [needle, json.dumps(needle)[1:-1], "".join(f"\\u{ord(c):04x}" for c in needle[:4])
            + needle[4:]]


@pytest.fixture(scope="module")
def server():
    with EchoServer() as srv:
        yield srv


def _record(server: EchoServer, position: str, text: str, root: Path) -> Path:
    path = root / "c.jsonl"
    base = f"http://127.0.0.1:{server.port}/v1/chat/completions"
    content = text if position == "request message" else "hello"
    if position == "resp sse split":  # cut mid-key and at the line break, as a model streams
        cut = len(text) // 2
        server.plan = (position, text[:cut] + "\x00" + text[cut:].replace("\n", "\x00\n"))
    else:
        server.plan = (position, text)
    body = {"model": "m", "messages": [{"role": "user", "content": content}],
            "stream": position == "resp sse split"}
    with hermes_replay.cassette(path, "record") as session, hermes_replay.rollout("r0"), \
            httpx.Client() as client:
        client.post(base, json=body).read()
    assert session.summary().recorded == 1
    return path


def _check(server: EchoServer, family: str, position: str, part: str) -> None:
    text, needles = FAMILIES[family][1](part)
    root = Path(tempfile.mkdtemp(prefix="families-"))
    try:
        path = _record(server, position, text, root)
        data = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
        for needle in needles:
            for form in _forms(needle):
                assert form.encode() not in data, f"{family} @ {position}: {form[:12]}… on disk"
        assert [f.describe() for f in verify_file(path)] == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


SETTINGS = settings(max_examples=3, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_never_reaches_disk_wherever_it_travels(server: EchoServer,
                                                         family: str) -> None:
    strategy = FAMILIES[family][0]

    @SETTINGS
    @given(part=strategy, position=st.sampled_from(POSITIONS))
    def run(part: str, position: str) -> None:
        _check(server, family, position, part)

    run()
    for position in POSITIONS:  # every position at least once, whatever hypothesis drew
        _check(server, family, position, _fixed(family))


def _fixed(family: str) -> str:
    if family == "aws-bare-secret":
        return "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzX9mQ2vT4p"
    alphabet, n = (VENDOR[family][0], VENDOR[family][1]) if family in VENDOR else (ALNUM, 30)
    return "".join(alphabet[(i * 7 + 3) % len(alphabet)] for i in range(n - 1)) + "7"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("families") / "sample.jsonl"
    record_sample(path, rollouts=1, turns=1)
    return path


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_verify_finds_a_planted_family_at_its_line(sample: Path, tmp_path: Path,
                                                   family: str) -> None:
    records: list[dict[str, Any]] = copy.deepcopy(read_records(sample))
    line = line_of(records, lambda r: r["type"] == "interaction")
    text, _ = FAMILIES[family][1](_fixed(family))
    records[line - 1]["request"]["body"]["messages"][-1]["content"] += "\n" + text
    path = tmp_path / "planted.jsonl"
    write_records(path, records)
    found = [f for f in verify_file(path) if f.kind == "secret"]
    assert found, f"verify found no {family}"
    assert {f.line for f in found} == {line}
