"""Message lists diffed as sequences: an inserted system message is one insertion with its
text, not a positional change of every message after it — in a replay's miss and in diff."""

from __future__ import annotations

from _calc_project import PROCESS_ARGS

from hermes_replay._cassette.matching import field_changes, field_report
from hermes_replay.cli import main

USER = ['body.messages[0].content: "What is 2+2?"', 'body.messages[0].role: "user"']
SYSTEM = ['body.messages[0].content: "Answer in French."', 'body.messages[0].role: "system"']


def _shifted(lines: list[str], by: int) -> list[str]:
    return [line.replace("messages[0]", f"messages[{by}]") for line in lines]


def test_an_inserted_message_is_one_insertion_with_its_text():
    old = [*USER, 'body.model: "m"']
    new = [*SYSTEM, *_shifted(USER, 1), 'body.model: "m"']
    changes = field_changes(old, new)
    assert [c.field for c in changes] == ["body.messages[0] (inserted)"]
    assert changes[0].lines == ('+body.messages[0].content: "Answer in French."',
                                '+body.messages[0].role: "system"')
    report = field_report(changes)
    assert report[0] == "1 message(s) inserted at [0]"


def test_a_deletion_and_a_change_beside_it_are_each_named():
    old = [*SYSTEM, *_shifted(USER, 1), 'body.messages[2].content: "4"',
           'body.messages[2].role: "assistant"', 'body.temperature: 1.0']
    new = [*_shifted(['body.messages[0].content: "What is 3+3?"',
                      'body.messages[0].role: "user"'], 0), 'body.temperature: 0.5']
    fields = [c.field for c in field_changes(old, new)]
    # the user message is aligned with the new [0] (changed), the others were deleted
    assert "body.messages[0].content" in fields
    assert sum(f.endswith("(deleted)") for f in fields) == 2
    assert "body.temperature" in fields
    assert not any(f.endswith(".role") for f in fields)


def test_lists_of_one_length_keep_the_positional_diff():
    old = [*USER]
    new = [line.replace("2+2", "3+3") for line in USER]
    assert [c.field for c in field_changes(old, new)] == ["body.messages[0].content"]


def test_a_replay_after_a_system_prompt_was_added_names_the_insertion(calc_project, capsys,
                                                                      tmp_path):
    code = main(["replay", "environments/calc_tool_env.py", "--cassette",
                 "cassettes/calc_tool_env/process.jsonl", "--out", str(tmp_path / "out"), "--",
                 *PROCESS_ARGS, "--env.system_prompt", "Answer in French."])
    err = capsys.readouterr().err
    assert code == 1
    assert "1 message(s) inserted at [0]" in err
    assert '+body.messages[0].content: "Answer in French."' in err
    roles = [line.strip() for line in err.splitlines() if ".role:" in line]
    assert roles and set(roles) == {'+body.messages[0].role: "system"'}  # nothing positional

    # `diff CASSETTE OUT`: the replay's transcripts are the recording's wherever a request
    # matched, so its misses are where they differ — each the same sequence diff
    assert main(["diff", "cassettes/calc_tool_env/process.jsonl", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert "transcripts not compared" not in out
    assert "requests that differ from the recording:" in out
    assert "1 message(s) inserted at [0]" in out
    assert '+body.messages[0].content: "Answer in French."' in out
