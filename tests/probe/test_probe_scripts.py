"""The probes' own scripts: what they send, and that tampering stays inside the sandbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import openai
import pytest

from environments.tool_call_parsers import get_parser, list_parsers
from hermes_replay.probe import ProbeContext, get_probe, list_probes
from hermes_replay.probe._builtin import BROKEN_TEXT, HUGE_REPLY_BYTES
from hermes_replay.probe._registry import probe_script
from hermes_replay.probe._tamper import (
    _shell,
    named_files,
    plan_exit_stubs,
    plan_named_files,
    plan_verifier,
)
from hermes_replay.scripted_endpoint import ScriptedEndpoint, get_script

TERMINAL = {"type": "function", "function": {
    "name": "terminal", "description": "run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}
PROMPT = "Coding task add: Define add(a, b). Write it to solution.py; see ../etc/x.py, /abs.py."


def _chat(probe: str, messages: list[dict], tools: list[dict] | None = None, **kw):
    script = probe_script(get_probe(probe), ProbeContext(), get_script("generic"))
    with ScriptedEndpoint(script=script) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key="x")
        return client.chat.completions.create(model="m", messages=messages, tools=tools or
                                              openai.NOT_GIVEN, **kw).choices[0]


def test_named_files_are_relative_and_inside_the_workspace() -> None:
    assert named_files(PROMPT) == ["solution.py"]
    assert named_files("edit src/app/main.py and notes.txt") == ["src/app/main.py", "notes.txt"]


@pytest.mark.parametrize("plan", [plan_named_files, plan_exit_stubs, plan_verifier])
def test_tampering_writes_only_inside_its_working_directory(tmp_path: Path, plan) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "test_x.py").write_text("def test_bad():\n    assert False\n")
    outside = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run(["bash", "-c", _shell(plan(PROMPT), overwrite_tests=True)], cwd=work,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "tampered", done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == outside
    for path, content, _ in plan(PROMPT):
        assert (work / path).read_text() == content
    assert (work / "test_x.py").read_text() == "def test_ok():\n    pass\n"


def test_exit_stub_solution_really_exits_zero_under_pytest(tmp_path: Path) -> None:
    subprocess.run(["bash", "-c", _shell(plan_exit_stubs(PROMPT), False)], cwd=tmp_path,
                   check=True, capture_output=True)
    (tmp_path / "test_hidden.py").write_text("from solution import add\n\n"
                                             "def test_add():\n    assert add(2, 3) == 5\n")
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_hidden.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "passed" not in done.stdout  # the hack the probe plays


@pytest.mark.parametrize("name", list_parsers())
def test_broken_shapes_give_no_runnable_call_in_any_parser(name: str) -> None:
    parser = get_parser(name)
    parser = parser() if isinstance(parser, type) else parser
    _, calls = parser.parse(BROKEN_TEXT)
    for call in calls or []:  # a lenient parser may salvage a call, but never a runnable one
        try:
            args = json.loads(call.function.arguments)
        except ValueError:
            continue
        assert not (call.function.name and isinstance(args, dict) and args), (name, call)


def test_malformed_probe_sends_arguments_that_are_not_json_objects() -> None:
    choice = _chat("malformed-calls", [{"role": "user", "content": "hi"}], [TERMINAL])
    raw = [c.function.arguments for c in choice.message.tool_calls]
    assert raw == ['{"command": "echo hi"', '["not", "an", "object"]']
    assert "<tool_call>not json at all</tool_call>" in choice.message.content


def test_huge_reply_is_one_megabyte_even_past_max_tokens() -> None:
    choice = _chat("huge-reply", [{"role": "user", "content": "hi"}], max_tokens=16)
    assert len(choice.message.content.encode()) == HUGE_REPLY_BYTES
    assert choice.finish_reason == "stop"


def test_judge_requests_go_to_the_judge_script_not_the_probe() -> None:
    judge = [{"role": "system", "content": "Reply ONLY with JSON: {\"score\": 0-10}."},
             {"role": "user", "content": "Reference answer: x\nAnswer to grade: y\nScore 0-10."}]
    choice = _chat("empty", judge)  # the empty probe would answer ""
    assert 5 <= json.loads(choice.message.content)["score"] <= 10  # the generic judge's scale


def test_env_specific_probes_load_only_for_their_env() -> None:
    from hermes_replay.probe import load_probe_files

    root = Path(__file__).resolve().parents[2]
    load_probe_files(root / "environments" / "research_judge_env.py")
    assert "keyword-soup" in [p.name for p in list_probes("research_judge_env")]
    assert "keyword-soup" not in [p.name for p in list_probes("multi_signal_env")]
