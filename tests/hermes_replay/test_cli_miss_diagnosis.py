"""A miss on the command line: each miss's diff by default (the first few, shortened, with the
count of the rest; ``-v`` for all), one miss count everywhere, and a next step made of CLI
commands that exist — ``record --missing-only``, ``--ignore-path``, ``--normalize`` — which
the tests then follow."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from _calc_project import CASSETTE_REL, ENV_REL, PROCESS_ARGS

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def _edit_env(project: Path, old: str, new: str) -> None:
    env = project / ENV_REL
    text = env.read_text(encoding="utf-8")
    assert old in text
    env.write_text(text.replace(old, new), encoding="utf-8")


def _all_prompts_change(project: Path) -> None:
    """The prompt gains today's date: same items (same rollout ids), other requests."""
    _edit_env(project, 'return item["question"]',
              'return item["question"] + " Today is 2026-12-01."')


def test_misses_show_their_diffs_by_default_and_counts_agree(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _all_prompts_change(calc_project)  # all 4 rollouts miss at their first turn
    assert main(["replay", CASSETTE_REL, "--out", "out"]) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert "4 request(s) had no matching recording" in err
    assert err.count("--- recorded (rollout ") == 3  # the first three, with their diffs
    assert "the request differs from the recording of this turn" in err
    assert '+body.messages[0].content: "What is 1 + 2? Use the calculator. Today is ' \
           '2026-12-01."' in err
    assert "… and 1 more miss(es) (train-" in err and "-v shows every diff in full" in err
    # the next step names commands that exist, not Python keyword arguments, with the
    # endpoint the cassette was recorded against (its header's), not placeholders
    header = json.loads((calc_project / CASSETTE_REL).read_text().splitlines()[0])
    assert (f"hermes-replay record {ENV_REL} --cassette {CASSETTE_REL} --missing-only "
            f"--endpoint {header['base_url']} --model {header['model']} --server-type "
            f"{header['endpoint_type']} -- process …") in err
    assert "--endpoint URL" not in err
    assert "mode=" not in err
    # hints only for what the diff holds: a date differs (normalize it if volatile); the only
    # differing field is the conversation, never a field to ignore
    assert f"hermes-replay normalize {CASSETTE_REL} --add datetime" in err
    assert "--ignore-path" not in err
    # one count: the summary, the table and result.json say what the error said
    assert "4 misses" in captured.out
    result = json.loads((calc_project / "out" / "process" / "result.json").read_text())
    assert len(result["misses"]) == 4
    # turns numbered alike in the report and in the env log
    assert "turn 1: POST /v1/chat/completions" in err
    log = (calc_project / "out" / "process" / "env.log").read_text()
    assert log.count("turn 1: replay miss, ending the rollout") == 4

    assert main(["replay", CASSETTE_REL, "--out", "out-v", "-v"]) == 1
    verbose = capsys.readouterr().err
    assert verbose.count("--- recorded (rollout ") == 4 and "more miss(es)" not in verbose


def test_record_missing_only_rerecords_what_changed_and_keeps_the_rest(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = calc_project / CASSETTE_REL
    before = load_cassette(cassette)
    # item 1's prompt changes: its 2 rollouts get new ids; item 0's stay as recorded
    _edit_env(calc_project, 'f"What is {i} + {i + 1}? Use the calculator."',
              'f"What is {i} + {i + 1}? Use the calculator." + ("!" if i == 1 else "")')
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        # a failing run keeps the old file
        code = main(["record", ENV_REL, "--missing-only", "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--server-type", "openai", "--", *PROCESS_ARGS,
                     "--env.crash_in", "setup"])
        assert code == 1 and cassette.read_bytes() == before.path.read_bytes()
        capsys.readouterr()
        code = main(["record", ENV_REL, "--missing-only", "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--server-type", "openai", "--", *PROCESS_ARGS])
        requests_made = len(endpoint.requests)
    out = capsys.readouterr().out
    assert code == 0, out
    after = load_cassette(cassette)
    kept = set(before.rollouts) & set(after.rollouts)
    new = set(after.rollouts) - set(before.rollouts)
    assert len(kept) == 2 and len(new) == 2 and len(after.rollouts) == 4
    for rid in kept:  # untouched: the very same recordings
        assert [i.request for i in after.rollouts[rid].interactions] == [
            i.request for i in before.rollouts[rid].interactions]
    turns = sum(len(after.rollouts[r].interactions) for r in new)
    assert requests_made == turns  # only what was missing went to the endpoint
    assert f"re-recorded {turns} turn(s) in 2 rollout(s): " in out
    # the counts add up to what the new file holds: re-recorded + kept = its interactions,
    # and the old recordings it no longer has are counted as dropped, never as "kept"
    holds = len(after.interactions)
    kept_turns = sum(len(after.rollouts[r].interactions) for r in kept)
    assert holds == turns + kept_turns
    assert (f"the new file holds {holds} interaction(s) in 4 rollout(s): {turns} re-recorded "
            f"+ {kept_turns} kept as they were") in out
    dropped = len(before.interactions) - kept_turns
    gone = sorted(set(before.rollouts) - set(after.rollouts))
    assert (f"{dropped} old recording(s) dropped: all {dropped} in 2 rollout(s) the command no "
            f"longer makes ({gone[0]}, {gone[1]})") in out
    assert "every other recording kept" not in out and "unused:" not in out
    # and now the replay passes
    assert main(["replay", CASSETTE_REL, "--out", "again"]) == 0


def test_ignore_path_and_normalize_flags_turn_a_miss_into_a_hit(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _all_prompts_change(calc_project)
    args = ["replay", CASSETTE_REL, "--normalize", r" Today is \d{4}-\d\d-\d\d\.="]
    assert main([*args, "--out", "normalized"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # --ignore-path leaves a field out of matching (here max_tokens, changed by the command)
    assert main(["replay", ENV_REL, "--cassette", CASSETTE_REL, "--normalize",
                 r" Today is \d{4}-\d\d-\d\d\.=", "--ignore-path", "body.max_tokens", "--",
                 *PROCESS_ARGS,
                 "--env.max_token_length", "77"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:  # a usage error: exit 2, saying what is wanted
        main(["replay", CASSETTE_REL, "--out", "o", "--normalize", "no-equals-sign"])
    assert usage.value.code == 2
    assert "or REGEX=REPLACEMENT" in capsys.readouterr().err


def test_tool_call_misses_count_once_in_progress_summary_error_and_result(
        calc_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A replayed tool call with no recording is a miss like an LLM miss: one ``miss`` event
    (what the progress line counts) per miss, and the same count in the summary, the
    exception and result.json."""
    from hermes_replay import CassetteMiss, ToolCallMiss
    from hermes_replay._runner.run import run_cassette

    cassette = calc_project / CASSETTE_REL
    lines = cassette.read_text(encoding="utf-8").splitlines(keepends=True)
    tools = [line for line in lines if json.loads(line).get("type") == "tool"]
    assert len(tools) >= 2  # the recording called the calculator
    cassette.write_text("".join(line for line in lines if line not in tools), encoding="utf-8")
    events: list = []
    result = run_cassette(CASSETTE_REL, out_dir=calc_project / "out", raise_errors=False,
                          on_event=events.append)
    error = result.error
    assert isinstance(error, CassetteMiss), error
    assert error.misses and all(m.method == "TOOL" for m in error.misses)
    missed = [e for e in events if e.kind == "miss"]
    assert len(missed) == len(error.misses) == len(result.misses) == len(result.summary.misses)
    saved = json.loads((calc_project / "out" / "result.json").read_text(encoding="utf-8"))
    assert len(saved["misses"]) == len(error.misses)
    assert {(e.rollout, e.seq) for e in missed} == {(m.rollout, m.seq) for m in error.misses}
    assert issubclass(ToolCallMiss, BaseException)


def _miss(diff: str) -> SimpleNamespace:
    return SimpleNamespace(diff=diff, normalizer=None)


def test_a_hint_is_given_only_when_the_diff_holds_its_kind_of_value() -> None:
    from hermes_replay._corpus.misses import cli_miss_hint

    prompt = _miss('-body.messages[0].content: "Answer in English."\n'
                   '+body.messages[0].content: "Answer in French."')
    hint = cli_miss_hint(None, [prompt])
    assert "--missing-only" in hint  # the re-record step is always there
    assert "normalize" not in hint and "--ignore-path" not in hint
    volatile = _miss('-body.metadata.request_id: "a1b2c3d4-0000-4000-8000-00000000beef"\n'
                     '+body.metadata.request_id: "f1b2c3d4-0000-4000-8000-00000000beef"')
    hint = cli_miss_hint(None, [volatile])
    assert "hermes-replay normalize CASSETTE --add uuid" in hint
    assert "--ignore-path body.metadata.request_id" in hint
    assert "datetime" not in hint
