"""Phase 2 (token-level) record → replay through atroposlib's own servers, end to end.

A ``process`` run of ``multi_signal_env`` goes through atroposlib's ``VLLMServer`` (or
``SGLangServer``) behind ``ManagedServer``: the conversation is rendered with the tokenizer's chat
template, sent as token ids / text to the scripted endpoint's ``/generate`` over aiohttp, and the
raw completion text is parsed for tool calls by the env's ``--env.tool_call_parser``. It is
recorded with ``hermes-replay record --server-type vllm|sglang``, the endpoint is then stopped,
and ``hermes-replay replay`` must produce the very same JSONL — tokens, masks, scores, messages
and ``inference_logprobs`` — byte for byte. The endpoint writes its tool calls in the parser's
format (hermes, qwen3_coder, mistral), so the parsers run on the recorded raw text in replay.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from hermes_replay._cassette import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = "environments/multi_signal_env.py"
# Tool-call markup each raw format writes; the replayed run must have parsed it back into calls.
MARKUP = {"hermes": "<tool_call>", "qwen3_coder": "<function=", "mistral": "[TOOL_CALLS]"}


def _env_flags(parser: str, out: Path) -> list[str]:
    return ["process", "--env.total_steps", "2", "--env.group_size", "4",
            "--env.max_agent_turns", "6", "--env.tool_call_parser", parser,
            "--env.data_path_to_save_groups", str(out)]


@pytest.fixture
def at_root(monkeypatch):
    # cassette headers store the env file relative to the working directory
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-phase2")
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    yield
    import wandb

    if wandb.run is not None:  # process mode's (disabled) run: leave no global state
        wandb.finish()


def _port_closed(url: str) -> bool:
    host, port = url.rsplit("//", 1)[1].split(":")
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) != 0


@pytest.mark.parametrize(("server_type", "parser"), [
    ("vllm", "hermes"),
    ("vllm", "qwen3_coder"),
    ("sglang", "mistral"),
])
def test_phase2_replay_gives_the_recorded_jsonl_byte_for_byte(
        server_type, parser, tmp_path, at_root, capsys):
    cassette = tmp_path / "phase2.jsonl"
    recorded, replayed = tmp_path / "recorded.jsonl", tmp_path / "replayed.jsonl"
    with ScriptedEndpoint(script="examples", seed=0, raw_tool_format=parser) as endpoint:
        code = main(["record", ENV_FILE, "--cassette", str(cassette),
                     "--endpoint", endpoint.root_url, "--model", "scripted",
                     "--server-type", server_type, "--", *_env_flags(parser, recorded)])
        assert code == 0, capsys.readouterr().err[-4000:]
        generated = [p for p, _ in endpoint.requests if p == "/generate"]
        assert generated  # Phase 2 only: nothing went through the chat API
        assert not any(p.startswith("/v1/chat") for p, _ in endpoint.requests)
        root_url = endpoint.root_url
    assert _port_closed(root_url), "the endpoint must be gone for the replay"

    code = main(["replay", ENV_FILE, "--cassette", str(cassette), "--strict", "--",
                 *_env_flags(parser, replayed)])
    output = capsys.readouterr()
    assert code == 0, output.out[-2000:] + output.err[-4000:]
    assert "0 misses" in output.out

    # what was recorded is token-level traffic of the right server shape
    tape = load_cassette(cassette)
    assert tape.header.endpoint_type == server_type
    assert tape.header.tokenizer and tape.header.tokenizer["fingerprint"].startswith("sha256:")
    assert tape.interactions and {i.kind for i in tape.interactions} == {"generate"}
    body = tape.interactions[0].request["body"]
    assert ("input_ids" in body) if server_type == "sglang" else ("prompt" in body)
    raw = json.dumps([i.response["body"] for i in tape.interactions])
    assert MARKUP[parser] in raw, f"the endpoint did not answer in {parser} format"

    # the JSONL, byte for byte — and it is real Phase 2 data, with parsed tool calls
    assert recorded.read_bytes() == replayed.read_bytes()
    groups = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert len(groups) == 2
    calls = 0
    for group in groups:
        assert len(group["inference_logprobs"]) == len(group["tokens"]) == 4
        for tokens, masks, logprobs in zip(group["tokens"], group["masks"],
                                           group["inference_logprobs"], strict=True):
            assert len(tokens) == len(masks) == len(logprobs)
            assert any(m != -100 for m in masks) and masks[0] == -100
            assert any(lp < 0.0 for lp in logprobs)
        for messages in group["messages"]:
            calls += sum(len(m.get("tool_calls") or []) for m in messages
                         if m["role"] == "assistant")
            assert not any(MARKUP[parser] in (m.get("content") or "") for m in messages
                           if m["role"] == "assistant"), "raw tool-call markup left unparsed"
    assert calls > 0, "no tool call was parsed from the recorded raw text"


_MORE = ["process", "--env.total_steps", "4", "--env.group_size", "2",
         "--env.max_agent_turns", "6", "--env.tool_call_parser", "hermes"]


@pytest.fixture(scope="module")
def four_items(tmp_path_factory):
    """A Phase-2 recording of four items x 2 (hermes markup in the raw replies)."""
    folder = tmp_path_factory.mktemp("p2")
    cassette = folder / "phase2.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # as at_root: the header names the env file relative to the root
        mp.setenv("HERMES_API_KEY", "sk-test-phase2")
        mp.delenv("HERMES_BASE_URL", raising=False)
        with ScriptedEndpoint(script="examples", seed=0, raw_tool_format="hermes") as endpoint:
            assert main(["record", ENV_FILE, "--cassette", str(cassette), "--endpoint",
                         endpoint.root_url, "--model", "scripted", "--server-type", "vllm",
                         "--", *_MORE,
                         "--env.data_path_to_save_groups", str(folder / "rec.jsonl")]) == 0
        import wandb

        if wandb.run is not None:
            wandb.finish()
    return cassette


def test_ls_counts_a_phase2_rollouts_tool_calls(four_items, capsys):
    """``/generate`` replies are raw text: ``ls`` showed 0 tool calls for every Phase-2
    rollout. The oracle: the ``<tool_call>`` blocks in each rollout's own recorded replies."""
    tape = load_cassette(four_items)
    expected = {rid: sum(i.response["body"]["text"][0].count("<tool_call>")
                         for i in rec.interactions) for rid, rec in tape.rollouts.items()}
    assert sum(expected.values()) > 0
    capsys.readouterr()
    assert main(["ls", str(four_items)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
            if line.strip().startswith("train-")}
    assert {rid: int(row[-2]) for rid, row in rows.items()} == expected


def test_a_phase2_replay_that_keeps_missing_shows_the_cause_before_it_stops(four_items,
                                                                            tmp_path):
    """A changed system prompt under ``--server-type vllm``: every ``/generate`` misses, the
    env's groups fail and it draws more items than were recorded, until the stall guard stops
    the run. The stop must show the misses' decoded prompt diff (it used to say "see the misses
    above" with none above), name a rollout the cassette holds (it named the last miss, one of
    the extra items), and end without asyncio's "Task exception was never retrieved" traceback
    of the interrupt (printed at interpreter exit: so the replay runs as its own process)."""
    import subprocess
    import sys

    recorded = set(load_cassette(four_items).rollouts)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("hermes-replay")), "replay", ENV_FILE,
         "--cassette", str(four_items), "--out", str(tmp_path / "out"), "--", *_MORE,
         "--env.data_path_to_save_groups", str(tmp_path / "rep.jsonl"),
         "--env.system_prompt", "You are terse."],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]
    stop = text.index("replay stopped — 25 requests in a row had no recording")
    named = text[stop:].split("; the first: rollout '", 1)[1].split("'", 1)[0]
    assert named in recorded, (named, sorted(recorded))
    diff = text.index("prompt text (decoded with the cassette's tokenizer")
    assert diff > stop and text.index("{+You are terse.", diff) > diff  # the cause, shown
    assert "Traceback" not in text and "never retrieved" not in text, text[-4000:]
