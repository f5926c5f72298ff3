"""Bad model output never crashes a rollout: errors are recorded, the loop ends, and the
reward stays in [0, 1].

A real environment (``MultiSignalEnv``, through atroposlib's ``OpenAIServer``) talks to the
scripted endpoint running a script registered here, whose rules misbehave on purpose (one
case per problem id): malformed tool-call text, arguments that are not JSON or not an
object, unknown tools, a multi-megabyte reply, a tool that floods its output, endless tool
use. What the script cannot express comes from a small canned loopback server: a reply of
a megabyte (a server that ignores ``max_tokens``), no choices, a null message, a body that
is not JSON, an HTTP error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _loopback_app import LoopbackApp
from aiohttp import web
from atroposlib.envs.server_handling.server_baseline import APIServer
from tenacity import wait_none

from environments._config import default_server_configs
from environments.multi_signal_env import MultiSignalEnv
from hermes_replay.scripted_endpoint import Reply, Rule, Script, ScriptedEndpoint, register_script

HUGE_REPLY = 1_000_000
FINAL = Reply(content="ANSWER: 0")


def _case(conv: Any) -> str:
    text = conv.first_user_text
    return text.split("Problem id: ", 1)[1].split(".", 1)[0] if "Problem id: " in text else ""


def _first(case: str) -> Any:
    return lambda conv: _case(conv) == case and not conv.tool_results


_TAG = "<tool_call>{}</tool_call>"
RULES = [
    Rule("malformed-call", _first("malformed-call"), lambda c, r: Reply(
        content=_TAG.format('{"name": "terminal", "arguments": {"command": "ls"'))),
    Rule("truncated-call", _first("truncated-call"), lambda c, r: Reply(
        content='Let me look. <tool_call>{"name": "termin')),
    Rule("call-without-name", _first("call-without-name"), lambda c, r: Reply(
        content=_TAG.format('{"arguments": {"command": "ls"}}'))),
    Rule("non-json-arguments-in-text", _first("non-json-arguments-in-text"), lambda c, r: Reply(
        content=_TAG.format('{"name": "terminal", "arguments": "{command: ls"}'))),
    Rule("arguments-not-object", _first("arguments-not-object"), lambda c, r: Reply(
        tool_calls=[("terminal", ["ls", "-la"])])),  # type: ignore[list-item]
    Rule("unknown-tool", _first("unknown-tool"), lambda c, r: Reply(
        tool_calls=[("format_disk", {"device": "/dev/sda"}), ("terminal", {"command": "true"})])),
    Rule("wrong-argument-types", _first("wrong-argument-types"), lambda c, r: Reply(
        tool_calls=[("terminal", {"command": 12345, "timeout": "soon"})])),
    Rule("flooding-tool", _first("flooding-tool"), lambda c, r: Reply(
        tool_calls=[("terminal", {"command": "head -c 3000000 /dev/zero | tr '\\0' x"})])),
    Rule("endless-tools", lambda c: _case(c) == "endless-tools", lambda c, r: Reply(
        tool_calls=[("terminal", {"command": f"echo turn {c.assistant_turn}"})])),
    Rule("after-tools", lambda c: bool(c.tool_results), lambda c, r: FINAL),
    Rule("fallback", lambda c: True, lambda c, r: FINAL),
]


@register_script("bad-model-output")
def bad_model_output() -> Script:
    return Script("bad-model-output", RULES)


SCRIPTED_CASES = [rule.name for rule in RULES[:9]]
TEXT_ONLY_CASES = ["malformed-call", "truncated-call", "call-without-name",
                   "non-json-arguments-in-text"]
# structured tool calls the scripted endpoint cannot emit (it always sends valid JSON)
CANNED_TOOL_CASES = {
    "non-json-arguments": [{"id": "c1", "type": "function",
                            "function": {"name": "terminal", "arguments": "{command: ls"}}],
    "nameless-call": [{"id": "c1", "type": "function", "function": {"arguments": "{}"}}],
    "tool-calls-not-list": "terminal(ls)",
    "function-not-object": [{"id": "c1", "type": "function", "function": "terminal"}],
}
BROKEN_CASES = ["empty-choices", "null-message", "not-json", "http-500"]


class CannedServer(LoopbackApp):
    """Answers /v1/chat/completions with the garbage named by the problem id in the prompt."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        text = " ".join(str(m.get("content")) for m in body["messages"])
        case = text.split("Problem id: ", 1)[1].split(".", 1)[0]
        self.calls[case] = self.calls.get(case, 0) + 1
        base = {"id": "x", "object": "chat.completion", "created": 0, "model": "m"}

        def reply(message: dict[str, Any]) -> web.Response:
            return web.json_response({**base, "choices": [
                {"index": 0, "finish_reason": "stop", "message": message}]})

        if body["messages"][-1]["role"] == "tool":
            return reply({"role": "assistant", "content": "ANSWER: 0"})
        if case in CANNED_TOOL_CASES:
            return reply({"role": "assistant", "content": None,
                          "tool_calls": CANNED_TOOL_CASES[case]})
        if case == "huge-reply":
            return reply({"role": "assistant", "content": "A" * HUGE_REPLY})
        if case == "empty-choices":
            return web.json_response({**base, "choices": []})
        if case == "null-message":
            return web.json_response({**base, "choices": [
                {"index": 0, "message": None, "finish_reason": "stop"}]})
        if case == "choices-not-list":
            return web.json_response({**base, "choices": {"0": "oops"}})
        if case == "not-json":
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
        return web.json_response({"error": {"message": "boom"}}, status=500)


@pytest.fixture
def no_retry_waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """atroposlib retries a failed call up to 9 times with random exponential waits, and the
    openai SDK retries each of those with its own back-off; keep the retries, drop the waits
    (seconds each) so the test stays fast."""
    for name in ("chat_completion", "_chat_comp"):
        monkeypatch.setattr(getattr(APIServer, name).retry, "wait", wait_none())
    monkeypatch.setattr(openai._base_client, "INITIAL_RETRY_DELAY", 0.01)
    yield


async def _env(base_url: str, **overrides: Any) -> MultiSignalEnv:
    config, _ = MultiSignalEnv.config_init()
    fields = {"use_wandb": False, "group_size": 2, "max_agent_turns": 4,
              "terminal_timeout": 20, **overrides}
    config = type(config)(**{**config.model_dump(), **fields})
    servers = default_server_configs(base_url=base_url, model_name="scripted",
                                     server_type="openai", api_key="sk-test-key")
    env = MultiSignalEnv(config, servers)
    await env.setup()
    return env


def _item(case: str) -> dict[str, str]:
    return {"id": case, "question": "What is 6 times 7?", "answer": "42"}


def _check(outcome: Any, case: str, max_turns: int) -> None:
    assert 0.0 <= outcome.reward <= 1.0, (case, outcome.reward)
    assert outcome.reward_error is None, (case, outcome.reward_error)
    assert 0 <= outcome.turns_used <= max_turns, case
    assert outcome.tokens is not None and len(outcome.tokens) == len(outcome.masks), case


async def test_bad_tool_calls_and_huge_outputs_never_crash_a_rollout() -> None:
    with ScriptedEndpoint(script="bad-model-output", seed=0) as ep:
        env = await _env(ep.base_url)
        tools = env._resolve_tools_for_group()
        outcomes = dict(zip(SCRIPTED_CASES, await asyncio.gather(*(
            env.rollout(_item(case), tools=tools) for case in SCRIPTED_CASES)), strict=True))
        group, _ = await env.collect_trajectories(_item("unknown-tool"))
    for case, outcome in outcomes.items():
        _check(outcome, case, max_turns=4)
    errors = {case: [e.error for e in o.result.tool_errors] for case, o in outcomes.items()}

    # text that only looks like a call is kept as the answer: no call, no crash
    for case in TEXT_ONLY_CASES:
        assert outcomes[case].finished_naturally and errors[case] == [], case
        assert "<tool_call>" in outcomes[case].final_response, case
    # calls the loop cannot run become errors the model reads, then it answers
    assert any("must be a JSON object" in e for e in errors["arguments-not-object"])
    assert any("Unknown tool 'format_disk'" in e for e in errors["unknown-tool"])
    assert len(errors["unknown-tool"]) == 1  # the valid call next to it still ran
    assert errors["wrong-argument-types"]
    for case in ("arguments-not-object", "unknown-tool", "wrong-argument-types"):
        tool_msgs = [m for m in outcomes[case].messages if m["role"] == "tool"]
        assert tool_msgs and json.loads(tool_msgs[0]["content"])["error"], case
        assert outcomes[case].final_response == "ANSWER: 0", case
    # a flooding tool is capped
    flood = [m["content"] for m in outcomes["flooding-tool"].messages if m["role"] == "tool"]
    assert flood and len(flood[0]) < 200_000, len(flood[0]) if flood else None
    # endless tool use stops at max_agent_turns, unfinished, still scored
    endless = outcomes["endless-tools"]
    assert endless.turns_used == 4 and not endless.finished_naturally
    assert sum(m["role"] == "tool" for m in endless.messages) == 4
    # the group path survives a bad model too
    assert group is not None and all(0.0 <= s <= 1.0 for s in group["scores"])


async def test_broken_responses_and_calls_never_crash_a_rollout(no_retry_waits: None) -> None:
    with CannedServer() as server:
        env = await _env(f"http://127.0.0.1:{server.port}/v1")
        huge = await env.rollout(_item("huge-reply"))
        tool_outcomes = await asyncio.gather(*(env.rollout(_item(c)) for c in CANNED_TOOL_CASES))
        outcomes = await asyncio.gather(*(env.rollout(_item(case)) for case in BROKEN_CASES))
    _check(huge, "huge-reply", max_turns=4)
    assert huge.finished_naturally and len(huge.final_response) == HUGE_REPLY  # kept whole
    for case, outcome in zip(CANNED_TOOL_CASES, tool_outcomes, strict=True):
        _check(outcome, case, max_turns=4)
        assert outcome.result.tool_errors, case  # recorded, shown to the model, loop went on
        assert outcome.final_response == "ANSWER: 0", case
    errors = {c: o.result.tool_errors[0].error for c, o in zip(CANNED_TOOL_CASES, tool_outcomes,
                                                               strict=True)}
    assert "Invalid JSON arguments" in errors["non-json-arguments"]
    for case, outcome in zip(BROKEN_CASES, outcomes, strict=True):
        _check(outcome, case, max_turns=4)
        # the broken call itself is a turn (the former layer's turns_used)
        assert outcome.turns_used == 1 and not outcome.finished_naturally, case
        assert [m["role"] for m in outcome.messages] == ["system", "user"] or \
            [m["role"] for m in outcome.messages] == ["user"], case
        assert server.calls[case] >= 1
