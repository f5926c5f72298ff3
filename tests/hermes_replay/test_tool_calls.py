"""Tool calls through ``hermes_replay.tool_call``: recorded, replayed without running, executed
with drift reports, missed with a field diff, scrubbed, stored once."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

import hermes_replay
from hermes_replay._cassette import CassetteHeader, load_cassette, write_cassette
from hermes_replay.scripted_endpoint import ScriptedEndpoint


class Tool:
    """A tool that counts its runs and answers what ``answers`` holds for a command."""

    def __init__(self, answers: dict[str, object] | None = None) -> None:
        self.runs: list[str] = []
        self.answers = answers or {}

    def __call__(self, command: str, source: str = "agent") -> object:
        def run() -> object:
            self.runs.append(command)
            answer = self.answers.get(command, {"output": f"ran {command}", "exit_code": 0})
            if isinstance(answer, Exception):
                raise answer
            return answer

        return hermes_replay.tool_call("terminal", {"command": command}, run, source=source)


def _record(path: Path, commands: dict[str, list[str]], tool: Tool | None = None) -> Tool:
    tool = tool or Tool()
    with hermes_replay.cassette(path, "record"):
        for rid, cmds in commands.items():
            with hermes_replay.rollout(rid):
                for cmd in cmds:
                    try:
                        tool(cmd)
                    except Exception:
                        pass
    return tool


def test_no_cassette_means_the_tool_just_runs() -> None:
    tool = Tool()
    assert tool("ls") == {"output": "ran ls", "exit_code": 0}
    assert tool.runs == ["ls"]


def test_replay_answers_from_the_cassette_and_runs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorded = _record(path, {"a": ["ls", "cat x"], "b": ["pwd"]},
                       Tool({"cat x": FileNotFoundError(2, "no such file")}))
    assert recorded.runs == ["ls", "cat x", "pwd"]
    calls = load_cassette(path).rollouts["a"].tool_calls
    assert [(c.seq, c.name, c.arguments, c.exit_code) for c in calls] == [
        (0, "terminal", {"command": "ls"}, 0), (1, "terminal", {"command": "cat x"}, None)]
    assert calls[1].raised == {"type": "FileNotFoundError", "args": [2, "no such file"]}

    tool = Tool()
    with hermes_replay.cassette(path, strict=True) as session:
        with hermes_replay.rollout("b"):
            assert tool("pwd") == {"output": "ran pwd", "exit_code": 0}
        with hermes_replay.rollout("a"):
            assert tool("ls") == {"output": "ran ls", "exit_code": 0}
            with pytest.raises(FileNotFoundError) as info:
                tool("cat x")
            assert info.value.errno == 2
    assert tool.runs == []  # nothing executed
    assert session.summary().tools_replayed == 3
    assert any("3 answered from the cassette, 0 executed" in line
               for line in session.summary().lines())


def test_a_changed_tool_call_is_a_miss_with_a_field_diff_and_runs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"a": ["ls", "echo one"]})
    tool = Tool()
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path):
            with hermes_replay.rollout("a"):
                tool("ls")
                with pytest.raises(hermes_replay.ToolCallMiss):
                    tool("touch /tmp/marker")
    assert tool.runs == []
    text = str(info.value)
    assert "rollout 'a'" in text and "terminal (tool call 1, agent); nothing was executed" in text
    assert '-tool.arguments.command: "echo one"' in text
    assert '+tool.arguments.command: "touch /tmp/marker"' in text
    assert "--tools execute" in text and "re-record" in text


def test_execute_runs_again_and_reports_drift_per_call(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"a": ["date", "ls"]}, Tool({"date": {"output": "Mon", "exit_code": 0}}))
    tool = Tool({"date": {"output": "Tue", "exit_code": 0}})
    with hermes_replay.cassette(path, tools="execute") as session:
        with hermes_replay.rollout("a"):
            assert tool("date") == {"output": "Tue", "exit_code": 0}  # the live result
            tool("ls")
    assert tool.runs == ["date", "ls"]
    summary = session.summary()
    assert summary.tools_executed == 2 and summary.tools_replayed == 0
    [drift] = summary.tool_drift
    assert (drift.rollout, drift.seq, drift.name) == ("a", 0, "terminal")
    assert '-tool.result.output: "Mon"' in drift.diff and '+tool.result.output: "Tue"' in drift.diff
    assert any("1 tool call(s) drifted" in line for line in summary.lines())

    with pytest.raises(hermes_replay.ToolCallsDrifted, match="result differs"):
        with hermes_replay.cassette(path, tools="execute", strict=True):
            with hermes_replay.rollout("a"):
                tool("date")
                tool("ls")


def test_a_per_tool_override_executes_only_that_tool(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    runs: list[str] = []

    def both() -> tuple[object, object]:
        with hermes_replay.rollout("a"):
            clock = hermes_replay.tool_call("clock", {}, lambda: runs.append("clock") or "12:00")
            shell = hermes_replay.tool_call("terminal", {"command": "ls"},
                                            lambda: runs.append("terminal") or "files")
        return clock, shell

    with hermes_replay.cassette(path, "record"):
        both()
    runs.clear()
    with hermes_replay.cassette(path, tool_overrides={"clock": "execute"}):
        assert both() == ("12:00", "files")
    assert runs == ["clock"]
    with pytest.raises(ValueError, match="unknown tool policy 'sometimes'"):
        hermes_replay.cassette(path, tool_overrides={"clock": "sometimes"})


def test_secrets_in_tool_arguments_and_results_never_reach_disk(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    tool = Tool({f"echo {key}": {"output": f"OPENAI_API_KEY={key}", "exit_code": 0}})
    _record(path, {"a": [f"echo {key}"]}, tool)
    assert key not in path.read_text()
    # replay scrubs the live call the same way, so it still matches
    with hermes_replay.cassette(path):
        with hermes_replay.rollout("a"):
            assert key not in json.dumps(Tool()(f"echo {key}"))


def test_a_long_tool_output_is_stored_once_with_the_request_that_echoes_it(
        tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    output = "".join(f"line {i}: {'x' * 40}\n" for i in range(200))  # ~10 KB
    with ScriptedEndpoint(script="generic") as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key="x")
        with hermes_replay.cassette(path, "record"):
            with hermes_replay.rollout("a"):
                messages = [{"role": "user", "content": "list the files"}]
                client.chat.completions.create(model="m", messages=messages)
                result = hermes_replay.tool_call("terminal", {"command": "ls -l"},
                                                 lambda: output)
                messages += [{"role": "assistant", "content": "calling ls"},
                             {"role": "user", "content": result}]
                client.chat.completions.create(model="m", messages=messages)
    text = path.read_text()
    assert text.count("line 199: ") == 1
    cassette = load_cassette(path)
    [call] = cassette.tool_calls
    assert call.result == output and call.turn == 0  # answers the first LLM turn
    kinds = [json.loads(line)["type"] for line in text.splitlines()]
    assert kinds.index("tool") > kinds.index("interaction")  # written after the turn it answers
    assert kinds[kinds.index("tool") + 1:].count("interaction") == 1


def test_a_schema_1_cassette_still_loads_and_its_tool_calls_miss_with_a_reason(
        tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    write_cassette(path, CassetteHeader(), [])
    record = json.loads(path.read_text().splitlines()[0])
    record["schema_version"] = 1
    path.write_text(json.dumps(record) + "\n")
    assert load_cassette(path).tool_calls == []
    tool = Tool()
    with pytest.raises(hermes_replay.CassetteMiss, match=r"before hermes-replay recorded tool "
                       r"calls \(schema 1\)"):
        with hermes_replay.cassette(path):
            with hermes_replay.rollout("a"), pytest.raises(hermes_replay.ToolCallMiss):
                tool("ls")
    assert tool.runs == []


def test_auto_answers_recorded_calls_and_records_new_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"a": ["ls"]})
    tool = Tool()
    with hermes_replay.cassette(path, "auto"):
        with hermes_replay.rollout("a"):
            tool("ls")
        with hermes_replay.rollout("b"):
            tool("pwd")
    assert tool.runs == ["pwd"]
    calls = load_cassette(path).tool_calls
    assert [(c.rollout, c.seq, c.arguments["command"]) for c in calls] == [
        ("a", 0, "ls"), ("b", 0, "pwd")]


def test_calls_gathered_out_of_order_still_match(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"a": ["one", "two"]})
    tool = Tool()
    with hermes_replay.cassette(path, strict=True):
        with hermes_replay.rollout("a"):
            assert tool("two") == {"output": "ran two", "exit_code": 0}
            assert tool("one") == {"output": "ran one", "exit_code": 0}
    assert tool.runs == []


def test_diff_names_the_first_differing_tool_call(tmp_path: Path) -> None:
    from hermes_replay._diff.compare import compare_paths

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _record(a, {"r": ["ls", "date"]}, Tool({"date": {"output": "Mon", "exit_code": 0}}))
    _record(b, {"r": ["ls", "date"]}, Tool({"date": {"output": "Tue", "exit_code": 3}}))
    report = compare_paths(a, b)
    [div] = report.tool_divergences
    assert (div.rollout, div.field) == ("r", "tool call 1 (terminal).result")
    assert '-tool.result.output: "Mon"' in div.diff and "+tool.exit_code: 3" in div.diff
    assert not report.equal
    _record(b, {"r": ["ls", "date -u"]})
    [div] = compare_paths(a, b).tool_divergences
    assert div.field == "tool call 1 (terminal).arguments.command"
    assert compare_paths(a, a).equal


def test_show_prints_the_recorded_tool_calls(tmp_path: Path, capsys) -> None:
    from hermes_replay.cli import main

    path = tmp_path / "c.jsonl"
    with hermes_replay.cassette(path, "record"):
        with hermes_replay.rollout("r"):
            Tool()("ls")
            Tool({"pytest": {"output": "1 failed", "exit_code": 1}})("pytest", source="reward")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "recorded tool calls (2)" in out
    assert "#0 terminal · before the first turn · exit 0" in out  # turns count from 1
    assert "#1 terminal · reward · exit 1" in out and "1 failed" in out


def test_normalizers_apply_to_executed_tool_results(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"a": ["pytest"]}, Tool({"pytest": {"output": "1 failed in 0.06s",
                                                      "exit_code": 1}}))
    tool = Tool({"pytest": {"output": "1 failed in 0.31s", "exit_code": 1}})
    with hermes_replay.cassette(path, tools="execute", strict=True,
                                normalizers=[(r"in \d+\.\d+s", "in <time>")]) as session:
        with hermes_replay.rollout("a"):
            tool("pytest")
    assert session.summary().tool_drift == [] and tool.runs == ["pytest"]


def test_a_reward_calls_difference_is_placed_in_the_reward_not_after_a_turn(tmp_path: Path,
                                                                            capsys) -> None:
    """A one-turn rollout (one model request), then its reward runs ``pytest``: when the
    reward's result differs, ``diff`` and the report place it "in the reward" — it answers no
    turn (it was labelled "after turn 2" in a rollout of one turn)."""
    from hermes_replay._report._model import build_state
    from hermes_replay._report._sources import load_runs, pair_runs
    from hermes_replay.cli import main

    def one_turn(path: Path, verdict: str, client: openai.OpenAI) -> None:
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "write the fix"}])
            Tool({"pytest": {"output": verdict, "exit_code": 0}})("pytest", source="reward")

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    from hermes_replay.scripted_endpoint import Reply, Rule, Script

    fixed = Script("fixed", [Rule("any", lambda c: True, lambda c, rng: Reply(content="done"))])
    with ScriptedEndpoint(script=fixed, seed=0) as ep:  # one endpoint, one reply: same turn
        client = openai.OpenAI(base_url=ep.base_url, api_key="x", max_retries=0)
        one_turn(a, "1 passed", client)
        one_turn(b, "1 failed", client)
    (call,) = load_cassette(a).tool_calls
    assert call.source == "reward"
    capsys.readouterr()
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "tool call 0 (terminal)" in x]
    assert "in the reward" in line and "after turn" not in line, out
    from hermes_replay._report import _charts

    state = build_state(pair_runs(load_runs(b), load_runs(a)), subject="b", against="a",
                        charts=_charts)
    (row,) = state["rows"]
    assert row["drift"] == "the reward: tool call 0 (terminal).result", row
    assert state["transcripts"][row["key"]]["diverge"]["turn"] is None
