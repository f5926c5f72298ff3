"""Script files for the scripted endpoint (``--script PATH``, docs/scripted-endpoint.md).

The docs' example is run as written: served by the real CLI subcommand, a user env (the calc
env, with its own tool) recorded against it through ``hermes-replay record``, the calls and
rewards read back from the cassette, then replayed with no endpoint. The format's rules —
conditions, captures, alternatives, padding, fallback, load-time errors — are checked over real
HTTP with the openai SDK.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint, ScriptFileError, load_script

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scripted-endpoint.md"
CALC_TOOL = [{"type": "function", "function": {
    "name": "calculator", "description": "evaluate an arithmetic expression",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}]


def docs_example() -> str:
    blocks = re.findall(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "docs/scripted-endpoint.md should hold exactly one toml example"
    return blocks[0]


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def chat(ep: ScriptedEndpoint, messages: list[dict], **kw) -> dict:
    body = {"model": "m", "messages": messages, **kw}
    reply = httpx.post(ep.base_url + "/chat/completions", json=body, timeout=10)
    assert reply.status_code == 200, reply.text
    return reply.json()


def serve_cli(script: str, cwd: Path, seed: int = 0) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_replay.cli", "scripted-endpoint", "--port", "0",
         "--script", script, "--seed", str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    banner = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        banner.append(line)
        if "base_url" in line:
            return proc, line.split()[-1]
    proc.kill()
    raise AssertionError(f"no base_url printed: {banner} {proc.stderr.read()}")


def test_docs_example_records_a_user_env_and_replays(tmp_path, monkeypatch, capsys):
    from _calc_project import CASSETTE_REL, ENV_REL, PROCESS_ARGS, write_project

    from environments.tools import registry

    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    write_project(tmp_path)
    write(tmp_path, docs_example(), "calculator.toml")
    monkeypatch.chdir(tmp_path)
    # seed 1: the 4 rollouts' picks include both the tool calls and the answer from memory
    proc, base_url = serve_cli("calculator.toml", tmp_path, seed=1)  # relative, as in the docs
    try:
        code = main(["record", ENV_REL, "--endpoint", base_url, "--model", "scripted",
                     "--server-type", "openai", "--", *PROCESS_ARGS])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    out = capsys.readouterr()
    assert code == 0, out.err

    cas = load_cassette(tmp_path / CASSETTE_REL)
    questions = {}
    first_replies = {}
    for inter in cas.interactions:
        body = inter.request["body"]
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        a, b = re.search(r"What is (\d+) \+ (\d+)\?", question).groups()
        questions[inter.rollout] = (a, b)
        if inter.seq == 0:
            first_replies[inter.rollout] = inter.response["body"]["choices"][0]["message"]
    assert len(first_replies) == 4
    called = 0
    for rollout, message in first_replies.items():
        a, b = questions[rollout]
        if message.get("tool_calls"):
            called += 1
            args = json.loads(message["tool_calls"][0]["function"]["arguments"])
            assert args["expression"] in (f"{a} + {b}", f"{a}+{b}")  # captures filled in
        else:
            assert message["content"].endswith(f"the answer is {a}{b}.")
            assert len(message["content"].split()) >= 12  # padded to min_words
    # the calc env: 1.0 with a tool call, 0.5 without
    assert 0 < called < 4
    rewards = sorted(o["reward"] for o in cas.outcomes.values())
    assert rewards == sorted([1.0] * called + [0.5] * (4 - called))
    # the "report" rule read the tool's JSON result through its own regex capture
    finals = [i.response["body"]["choices"][0]["message"]["content"]
              for i in cas.interactions if i.seq == 1]
    assert len(finals) == called
    for text in finals:
        assert re.search(r"(The calculator says|So the answer is) \d+\.0\.$", text), text

    assert main(["replay", CASSETTE_REL, "--strict"]) == 0, capsys.readouterr().err


def test_conditions_captures_and_padding(tmp_path):
    path = write(tmp_path, '''
name = "t"
fallback = "none"
min_words = 0
[[rules]]
name = "second-turn"
when = { min_turn = 1, last_role = "tool", last_tool_result_contains = ["OK", "done"] }
reply = { text = "finished after ${turn} calls: ${tool_result}" }
[[rules]]
name = "search"
when = { last_user_matches = 'find (?P<thing>\\w+)', tool_offered = "calculator" }
reply = { tool_calls = [{ name = "calculator", arguments = { expression = "${thing}", n = 2 } }] }
[[rules]]
name = "echo"
min_words = 20
when = { system_contains = "ECHO", route = "chat" }
reply = { text = "you said ${last_user}", reasoning = "thinking about ${1}" }
''')
    with pytest.raises(ScriptFileError, match=r"placeholder.*'1'"):
        load_script(path)  # ${1} with no regex in that rule
    path.write_text(path.read_text().replace("thinking about ${1}", "cost $$5"))
    with ScriptedEndpoint(script=str(path)) as ep:
        got = chat(ep, [{"role": "user", "content": "please find cats"}], tools=CALC_TOOL)
        call = got["choices"][0]["message"]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == {"expression": "cats", "n": 2}
        history = [{"role": "user", "content": "please find cats"},
                   {"role": "assistant", "content": "", "tool_calls": [{
                       "id": "c1", "type": "function",
                       "function": {"name": "calculator", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "all done"}]
        got = chat(ep, history, tools=CALC_TOOL)
        assert got["choices"][0]["message"]["content"] == "finished after 1 calls: all done"
        got = chat(ep, [{"role": "system", "content": "ECHO mode"},
                        {"role": "user", "content": "hello"}])
        message = got["choices"][0]["message"]
        assert message["content"].endswith("you said hello")
        assert len(message["content"].split()) >= 20  # filler in front, own words last
        assert message["reasoning_content"] == "cost $5"
        # no rule (fallback "none"): 422 naming the file to add a rule to
        miss = httpx.post(ep.base_url + "/chat/completions", timeout=10,
                          json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert miss.status_code == 422 and str(path) in miss.text
        # /v1/completions is not route "chat": the echo rule does not answer it
        prompt = "<|im_start|>system\nECHO mode<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
        raw = httpx.post(ep.base_url + "/completions", timeout=10,
                         json={"model": "m", "prompt": prompt})
        assert raw.status_code == 422, raw.text


async def test_alternatives_differ_across_a_group_and_reproduce(tmp_path):
    path = write(tmp_path, '''
[[rules]]
when = { last_user_contains = "guess" }
[[rules.reply]]
text = ["red", "green", "blue", "cyan", "pink"]
[[rules.reply]]
tool_calls = [{ name = "calculator", arguments = '{"expression": broken' }]
''')
    samples = []
    for _ in range(2):
        with ScriptedEndpoint(script=path, seed=3) as ep:
            client = openai.AsyncOpenAI(base_url=ep.base_url, api_key="x", max_retries=0)
            try:
                got = await client.chat.completions.create(
                    model="m", n=8, temperature=1.0, tools=CALC_TOOL,
                    messages=[{"role": "user", "content": "guess a colour"}])
            finally:
                await client.close()
        samples.append([(c.message.content, [t.function.arguments
                                              for t in c.message.tool_calls or []])
                        for c in got.choices])
    assert samples[0] == samples[1]  # seeded: the same group again
    assert len(set(map(str, samples[0]))) > 2  # but the samples of one group differ
    broken = [calls for _, calls in samples[0] if calls]
    assert broken and broken[0] == ['{"expression": broken']  # string arguments as written


def test_generic_fallback_answers_what_the_file_does_not(tmp_path):
    path = write(tmp_path, "[[rules]]\nwhen = { judge = true }\n"
                           "reply = { text = '{\"score\": 1}' }\n")
    with ScriptedEndpoint(script=path) as ep:
        got = chat(ep, [{"role": "user", "content": "what is up"}])
        assert "what is up" in got["choices"][0]["message"]["content"]  # generic plain answer
        got = chat(ep, [{"role": "user", "content": "Rate this answer 0-10, reply in JSON"}])
        assert got["choices"][0]["message"]["content"] == '{"score": 1}'


def test_json_script_file_same_shape(tmp_path):
    path = write(tmp_path, json.dumps({"fallback": "none", "rules": [
        {"name": "hi", "when": {"last_user_contains": "hi"}, "reply": {"text": "hello"}}]}),
        "s.json")
    with ScriptedEndpoint(script=path) as ep:
        assert chat(ep, [{"role": "user", "content": "hi"}])["choices"][0]["message"][
            "content"] == "hello"


@pytest.mark.parametrize(("text", "expected"), [
    ('[[rules]]\nwhen = { last_usr_contains = "x" }\nreply = { text = "y" }',
     r"rule 1 \('rule-1'\), when key 'last_usr_contains': unknown; did you mean "
     r"'last_user_contains'"),
    ('[[rules]]\nname = "r"\nwhen = { last_user_matches = "(" }\nreply = { text = "y" }',
     r"rule 1 \('r'\), when.last_user_matches: bad regular expression"),
    ('[[rules]]\nreply = { text = "cost $5" }', r"placeholder\(s\) \['5'\].*write \$\$ for a"),
    ('[[rules]]\nreply = { text = "cost $ 5" }', r"is not a \$\{name\} placeholder; write \$\$"),
    ('[[rules]]\nwhen = { turn = "1" }\nreply = { text = "y" }', r"when.turn: must be a whole"),
    ('[[rules]]\nname = "r"', r"rule 1 \('r'\), reply: missing"),
    ('[[rules]]\nreply = {}', r"reply: needs text or tool_calls"),
    ('fallback = "nope"\n[[rules]]\nreply = { text = "y" }', r"fallback: .*no script named"),
    ('rule = []', r"top level key 'rule': unknown; did you mean 'rules'"),
    ('[[rules]\n', r"not valid TOML"),
    # issue 36, finding 13: each of these stopped the server (chat, /health, SIGTERM)
    ('[[rules]]\nname = "r"\nwhen = { last_user_matches = \'(?:\\w+\\s?)+QQQ\' }\n'
     'reply = { text = "y" }',
     r"rule 1 \('r'\), when.last_user_matches: .* can backtrack without end"),
    ('min_words = 1000000000000\n[[rules]]\nreply = { text = "y" }',
     r"min_words: is 1,000,000,000,000; at most 100,000 words"),
    ('[[rules]]\nmin_words = 100001\nreply = { text = "y" }', r"min_words: is 100,001"),
    # also seen: "maximum recursion depth exceeded", naming no file
    ("x = " + "[" * 5000 + "]" * 5000 + "\n[[rules]]\nreply = { text = 'y' }",
     r"file: (is nested too deeply|not valid TOML)"),
])
def test_mistakes_are_named_at_load(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ScriptFileError, match=expected) as err:
        load_script(path)
    assert str(path) in str(err.value) and "docs/scripted-endpoint.md" in str(err.value)


def test_a_json_script_nested_deeply_names_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"rules": [{"reply": {"text": "y"}}], "x": ' + "[" * 100_000
                    + "]" * 100_000 + "}")
    with pytest.raises(ScriptFileError, match="file: is nested too deeply") as err:
        load_script(path)
    assert str(path) in str(err.value)


def test_cli_refuses_a_bad_or_missing_script_file(tmp_path):
    bad = write(tmp_path, '[[rules]]\nreply = { txt = "y" }')
    for script, expected in ((str(bad), "reply key 'txt': unknown; did you mean 'text'"),
                             (str(tmp_path / "missing.toml"), "cannot read script file")):
        done = subprocess.run(
            [sys.executable, "-m", "hermes_replay.cli", "scripted-endpoint", "--script", script],
            capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        # named once: "hermes-replay scripted-endpoint: scripted endpoint: …" was doubled
        assert done.stderr.startswith("hermes-replay scripted-endpoint: ")
        assert "scripted endpoint:" not in done.stderr, done.stderr


def test_registered_names_win_over_a_stray_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "this is not toml", "generic")
    with ScriptedEndpoint(script="generic") as ep:
        assert ep.script.name == "generic" and ep.script.source is None
