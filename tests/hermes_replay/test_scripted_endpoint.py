"""The scripted endpoint (a stand-in for a model, not a model) over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from hermes_replay.scripted_endpoint import (
    FaultPlan,
    Reply,
    Rule,
    Script,
    ScriptedEndpoint,
    get_script,
)

TOOLS = [
    {"type": "function", "function": {
        "name": "terminal", "description": "run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "web_search", "description": "search the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}},
]
ASK = [{"role": "user", "content": "search the web for cats"}]


_clients: list[openai.AsyncOpenAI] = []


def client(ep: ScriptedEndpoint, **kw) -> openai.AsyncOpenAI:
    c = openai.AsyncOpenAI(base_url=ep.base_url, api_key="x", max_retries=0, **kw)
    _clients.append(c)
    return c


@pytest.fixture(autouse=True)
async def _close_clients():
    yield
    while _clients:  # unclosed SDK clients would leak sockets into later tests' warnings
        await _clients.pop().close()


@pytest.fixture
def ep():
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        yield endpoint


async def test_chat_with_tools_returns_tool_calls(ep):
    r = await client(ep).chat.completions.create(model="scripted", messages=ASK, tools=TOOLS)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "web_search"
    assert json.loads(call.function.arguments) == {"query": "search the web for cats"}
    assert r.model == "scripted" and r.system_fingerprint == "hermes-replay-scripted"
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert ep.requests[-1][0] == "/v1/chat/completions"
    assert ep.requests[-1][1]["tools"] == TOOLS


async def test_generic_tool_arguments_are_a_phrase_not_the_whole_prompt(ep):
    # an env's long prompt: instructions, a worked example, then the question
    prompt = ("You are a research assistant. Use the tools before you answer.\n"
              "Example: Q: capital of Peru? A: Lima.\n" + "Context sentence. " * 60 +
              "\nWhich search engine indexes cats best? Answer in one word.")
    r = await client(ep).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": prompt}], tools=TOOLS[1:])
    query = json.loads(r.choices[0].message.tool_calls[0].function.arguments)["query"]
    assert query == "Example: Q: capital of Peru?"  # the first question, not the prompt
    assert len(query) <= 80


async def test_after_tool_result_answers_quoting_it(ep):
    messages = [*ASK,
                {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "c1", "type": "function",
                    "function": {"name": "web_search", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "cats are great"}]
    r = await client(ep).chat.completions.create(model="m", messages=messages, tools=TOOLS)
    assert r.choices[0].finish_reason == "stop"
    assert "cats are great" in r.choices[0].message.content
    assert r.choices[0].message.tool_calls is None


async def test_judge_prompt_gets_json_score(ep):
    messages = [{"role": "system", "content": "You are a judge. Reply in JSON with a score 0-10."},
                {"role": "user", "content": "Answer: 4. Is it right?"}]
    r = await client(ep).chat.completions.create(model="m", messages=messages)
    verdict = json.loads(r.choices[0].message.content)
    assert 0 <= verdict["score"] <= 10 and verdict["reason"]


async def test_streaming_tool_calls_and_usage(ep):
    stream = await client(ep).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "run a command"}], tools=TOOLS,
        stream=True, stream_options={"include_usage": True})
    name, args, finish, usage = "", "", None, None
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            for tc in c.delta.tool_calls or []:
                name += tc.function.name or ""
                args += tc.function.arguments or ""
            finish = c.finish_reason or finish
    assert name == "terminal" and json.loads(args) == {"command": "echo scripted"}
    assert finish == "tool_calls" and usage is not None and usage.total_tokens > 0


async def test_streaming_text_equals_non_streamed(ep):
    kw = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    plain = await client(ep).chat.completions.create(**kw)
    parts = [c.choices[0].delta.content or "" async for c in
             await client(ep).chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(parts) == plain.choices[0].message.content


async def _answers(ep: ScriptedEndpoint, count: int, **kw) -> list[str]:
    out = []
    for _ in range(count):
        r = await client(ep).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "tell me"}], **kw)
        out.append(r.choices[0].message.content)
    return out


async def test_identical_requests_differ_but_reproduce_across_fresh_endpoints():
    with ScriptedEndpoint(script="generic", seed=7) as a:
        first = await _answers(a, 4, temperature=1.0)
    with ScriptedEndpoint(script="generic", seed=7) as b:
        second = await _answers(b, 4, temperature=1.0)
        r = await client(b).chat.completions.create(  # sample indices continue at 4
            model="m", messages=[{"role": "user", "content": "tell me"}], n=2, temperature=1.0)
    with ScriptedEndpoint(script="generic", seed=7) as c:
        r6 = await client(c).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "tell me"}], n=6, temperature=1.0)
    assert first == second
    assert len(set(first)) > 1
    # one request with n=6 sees the same samples as 4 + 2 single requests
    assert [ch.message.content for ch in r6.choices] == first + [
        ch.message.content for ch in r.choices]


async def test_other_seed_gives_other_samples():
    with ScriptedEndpoint(script="generic", seed=1) as a:
        one = await _answers(a, 4, temperature=1.0)
    with ScriptedEndpoint(script="generic", seed=2) as b:
        two = await _answers(b, 4, temperature=1.0)
    assert one != two


async def test_temperature_zero_is_greedy(ep):
    answers = await _answers(ep, 3, temperature=0)
    assert len(set(answers)) == 1
    r = await client(ep).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "tell me"}], n=3, temperature=0)
    assert [c.message.content for c in r.choices] == answers


async def test_n_choices(ep):
    r = await client(ep).chat.completions.create(model="m", messages=ASK, tools=TOOLS, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert all(c.message.tool_calls for c in r.choices)
    assert len({c.message.tool_calls[0].id for c in r.choices}) == 3


async def test_max_tokens_cuts_with_length(ep):
    r = await client(ep).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "tell me a long story"}], max_tokens=3)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 3


async def test_chat_logprobs(ep):
    r = await client(ep).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], logprobs=True, top_logprobs=1)
    lp = r.choices[0].logprobs.content
    assert "".join(t.token for t in lp) == r.choices[0].message.content
    assert all(t.logprob <= 0 for t in lp)


async def test_completions(ep):
    r = await client(ep).completions.create(model="m", prompt="hello there", n=2, logprobs=1)
    # sample 0 echoes the prompt; the others answer it in other shapes (generic's plain answers
    # differ within a group, so an identical-score filter does not drop the group)
    assert len(r.choices) == 2 and "hello there" in r.choices[0].text
    assert r.choices[0].text != r.choices[1].text
    assert "".join(r.choices[0].logprobs.tokens) == r.choices[0].text
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens > 0


def test_health_and_models_sync(ep):
    assert httpx.get(ep.root_url + "/health").status_code == 200
    models = httpx.get(ep.base_url + "/models").json()
    assert models["data"][0]["id"] == "scripted"


async def test_fault_5xx_then_recovers(ep):
    ep.fail_next(1, "5xx")
    with pytest.raises(openai.APIStatusError) as info:
        await client(ep).chat.completions.create(model="m", messages=ASK)
    assert info.value.status_code in (500, 503)
    assert "scripted fault" in info.value.message
    ok = await client(ep).chat.completions.create(model="m", messages=ASK)
    assert ok.choices[0].message.content
    assert ep.faults_injected == 1


async def test_fault_drop_is_connection_error(ep):
    ep.fail_next(1, "drop")
    with pytest.raises(openai.APIConnectionError):
        await client(ep).chat.completions.create(model="m", messages=ASK)
    assert ep.faults_injected == 1


async def test_fault_timeout_and_quick_stop():
    endpoint = ScriptedEndpoint(script="generic", faults=FaultPlan(timeout_s=30))
    async with endpoint as ep:
        ep.fail_next(1, "timeout")
        with pytest.raises(openai.APITimeoutError):
            await client(ep, timeout=0.3).chat.completions.create(model="m", messages=ASK)
        started = time.monotonic()
    assert time.monotonic() - started < 5  # the held request does not keep stop() waiting


def test_random_faults_are_seeded():
    def outcomes() -> list[int]:
        plan = FaultPlan(rate=0.5, kinds=("5xx",), seed=3)
        with ScriptedEndpoint(script="generic", faults=plan) as ep, httpx.Client() as http:
            codes = [http.post(ep.base_url + "/chat/completions",
                               json={"model": "m", "messages": ASK}).status_code
                     for _ in range(12)]
            assert http.get(ep.root_url + "/health").status_code == 200  # never faulted
            return codes

    first = outcomes()
    assert first == outcomes()
    assert 200 in first and any(c >= 500 for c in first)


def test_latency_is_applied():
    with ScriptedEndpoint(script="generic", latency=(0.2, 0.25)) as ep:
        t0 = time.monotonic()
        httpx.post(ep.base_url + "/chat/completions", json={"model": "m", "messages": ASK})
        assert time.monotonic() - t0 >= 0.2


def test_stop_is_clean():
    before = {t.ident for t in threading.enumerate()}
    ep = ScriptedEndpoint(script="generic").start()
    port = ep.port
    assert httpx.get(ep.root_url + "/health").status_code == 200
    ep.stop()
    assert {t.ident for t in threading.enumerate()} <= before
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_reset_restarts_samples_and_log():
    with ScriptedEndpoint(script="generic", seed=5) as ep:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        url = ep.base_url + "/chat/completions"
        a = httpx.post(url, json=body).json()["choices"][0]["message"]["content"]
        ep.reset()
        assert ep.requests == []
        b = httpx.post(url, json=body).json()["choices"][0]["message"]["content"]
        assert a == b


def test_custom_script_and_no_match():
    script = Script("shout", [Rule(
        "shout", lambda c: "hi" in c.last_user_text,
        lambda c, rng: Reply(content=c.last_user_text.upper()))])
    with ScriptedEndpoint(script=script) as ep:
        url = ep.base_url + "/chat/completions"
        ok = httpx.post(url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert ok.json()["choices"][0]["message"]["content"] == "HI"
        miss = httpx.post(url, json={"model": "m",
                                     "messages": [{"role": "user", "content": "yo"}]})
        assert miss.status_code == 422 and "no rule of script 'shout'" in miss.text


def test_unknown_script_lists_names():
    with pytest.raises(KeyError, match="generic"):
        get_script("no-such-script")
    assert get_script("examples").rules  # falls back to generic until examples exists


async def test_atropos_server_manager_chat_completion(ep):
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager

    manager = ServerManager([APIServerConfig(
        base_url=ep.base_url, server_type="openai", health_check=False, api_key="x",
        model_name="scripted")])
    r = await manager.chat_completion(messages=ASK, tools=TOOLS, n=2, temperature=1.0)
    await manager.servers[0].openai.close()
    assert len(r.choices) == 2
    assert r.choices[0].message.tool_calls[0].function.name == "web_search"


def _vllm_config(ep: ScriptedEndpoint, server_type: str):
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    from hermes_replay._tokenizers.bundled import tokenizer_path

    return APIServerConfig(base_url=ep.base_url, server_type=server_type, health_check=False,
                           api_key="x", model_name="scripted", tokenizer_name=tokenizer_path())


@pytest.mark.parametrize("server_type", ["vllm", "sglang"])
async def test_generate_tokens_and_logprobs(ep, server_type):
    from atroposlib.envs.server_handling.server_manager import ServerManager

    from hermes_replay._tokenizers.bundled import load_tokenizer

    tok = load_tokenizer()
    manager = ServerManager([_vllm_config(ep, server_type)])
    prompt = tok.apply_chat_template(ASK, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    prompt_ids, outs, lps, finishes = await manager.tokens_and_logprobs_completion(
        prompt=prompt, n=2, max_tokens=200, temperature=1.0)
    assert prompt_ids == tok.encode(prompt)
    assert len(outs) == 2 and all(len(o) == len(lp) for o, lp in zip(outs, lps, strict=True))
    assert all(v <= 0 for lp in lps for v in lp)
    text = tok.decode(outs[0])
    assert '<tool_call>\n{"name": "web_search"' in text and outs[0][-1] == tok.eos_token_id
    finish = finishes[0]["type"] if isinstance(finishes[0], dict) else finishes[0]
    assert finish == "stop"
    _, cut, _, cut_finish = await manager.tokens_and_logprobs_completion(
        prompt=prompt, n=1, max_tokens=4, temperature=0)
    assert len(cut[0]) == 4
    assert (cut_finish[0]["type"] if isinstance(cut_finish[0], dict) else cut_finish[0]) \
        == "length"


async def test_managed_server_over_vllm_generate(ep):
    from atroposlib.envs.server_handling.server_manager import ServerManager

    from hermes_replay._tokenizers.bundled import load_tokenizer

    manager = ServerManager([_vllm_config(ep, "vllm")])
    async with manager.managed_server(tokenizer=load_tokenizer()) as managed:
        r = await managed.chat_completion(messages=ASK, n=1, temperature=1.0, max_tokens=200)
        state = managed.get_state()
    # without vLLM installed ManagedServer drops tools, so the script answers in plain text
    assert "search the web for cats" in r.choices[0].message.content
    node = state["nodes"][0]
    assert node.logprobs[-1] <= 0 and len(node.tokens) == len(node.masked_tokens)


def test_vllm_prompt_logprobs(ep):
    body = {"prompt": {"prompt_token_ids": [5, 6, 7]}, "prompt_logprobs": 2, "max_tokens": 1,
            "temperature": 0.0, "n": 1}
    out = httpx.post(ep.root_url + "/generate", json=body).json()
    assert out["prompt_logprobs"][0] is None and len(out["prompt_logprobs"]) == 3
    assert len(out["prompt_logprobs"][1]) == 2 and "6" in out["prompt_logprobs"][1]


def test_cli_subcommand_serves_health():
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(
        [sys.executable, "-m", "hermes_replay.cli", "scripted-endpoint", "--port", "0",
         "--script", "generic", "--latency-ms", "1-2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    ) as proc:
        try:
            base = None
            deadline = time.monotonic() + 30
            while base is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if "base_url" in line:
                    base = line.split()[-1]
            assert base and base.startswith("http://127.0.0.1:")
            assert httpx.get(base.removesuffix("/v1") + "/health").status_code == 200
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert proc.returncode == 0


async def test_tool_choice_is_respected(ep):
    none = await client(ep).chat.completions.create(
        model="m", messages=ASK, tools=TOOLS, tool_choice="none")
    assert none.choices[0].message.tool_calls is None
    forced = await client(ep).chat.completions.create(
        model="m", messages=ASK, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "terminal"}})
    assert forced.choices[0].message.tool_calls[0].function.name == "terminal"


def test_chatml_prompt_parses_back_to_the_conversation():
    from hermes_replay._tokenizers.bundled import load_tokenizer
    from hermes_replay.scripted_endpoint._chatml import parse_chatml

    messages = [
        {"role": "system", "content": "Be brief."}, *ASK,
        {"role": "assistant", "content": "ok", "tool_calls": [{
            "id": "a", "type": "function",
            "function": {"name": "web_search", "arguments": '{"query": "cats"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "cats are great"},
    ]
    text = load_tokenizer().apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    parsed, tools = parse_chatml(text)
    assert tools == TOOLS
    assert [m["role"] for m in parsed] == ["system", "user", "assistant", "tool"]
    assert parsed[0]["content"] == "Be brief."
    call = parsed[2]["tool_calls"][0]
    assert call["function"]["name"] == "web_search"
    assert json.loads(call["function"]["arguments"]) == {"query": "cats"}
    assert parsed[3] == {"role": "tool", "tool_call_id": call["id"], "content": "cats are great"}


@pytest.mark.parametrize("fmt", ["hermes", "mistral", "qwen3_coder"])
def test_raw_text_uses_the_parser_format(fmt):
    from environments.tool_call_parsers import get_parser
    from hermes_replay._tokenizers.bundled import load_tokenizer

    prompt = load_tokenizer().apply_chat_template(
        ASK, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    with ScriptedEndpoint(script="generic", raw_tool_format=fmt) as ep:
        out = httpx.post(ep.base_url + "/completions",
                         json={"model": "m", "prompt": prompt, "max_tokens": 300}).json()
    _content, calls = get_parser(fmt).parse(out["choices"][0]["text"])
    assert calls and calls[0].function.name == "web_search"
    assert json.loads(calls[0].function.arguments) == {"query": "search the web for cats"}
