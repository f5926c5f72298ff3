"""``hermes-replay ls`` and ``show`` on a small cassette written with the core's writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay._cassette import CassetteHeader, Interaction, write_cassette
from hermes_replay.cli import main

SYSTEM = {"role": "system", "content": "You are a careful agent. Use tools."}
USER = {"role": "user", "content": "How many files are in /data?"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "terminal", "arguments": json.dumps({"command": "ls /data | wc -l"})},
}
ASSISTANT_1 = {"role": "assistant", "content": None, "tool_calls": [CALL],
               "reasoning_content": "I should count them with ls."}
TOOL = {"role": "tool", "tool_call_id": "call_1", "name": "terminal", "content": "3"}
ASSISTANT_2 = {"role": "assistant", "content": "There are 3 files."}
TOOL_SCHEMA = {"type": "function", "function": {"name": "terminal", "parameters": {}}}
LONG_TOOL = {"role": "tool", "tool_call_id": "call_9", "name": "read_file",
             "content": "x" * 5000}


def _chat(rollout: str, seq: int, messages: list, reply: dict) -> Interaction:
    return Interaction(
        rollout=rollout, seq=seq, kind="chat", fingerprint=f"fp{seq}", duration_ms=12.0,
        request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                 "headers": {}, "body": {"model": "scripted", "messages": messages,
                                         "temperature": 1.0, "tools": [TOOL_SCHEMA]}},
        response={"status": 200, "headers": {},
                  "body": {"choices": [{"index": 0, "message": reply,
                                        "finish_reason": "stop"}]}},
    )


def _sse(rollout: str, seq: int, messages: list) -> Interaction:
    chunks = [
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"I do "}}]}\n\n',
        'data: {"choices":[{"index":0,"delta":{"content":"not know."}}]}\n\n',
        "data: [DONE]\n\n",
    ]
    return Interaction(
        rollout=rollout, seq=seq, kind="chat",
        request={"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
                 "headers": {}, "body": {"model": "scripted", "messages": messages,
                                         "stream": True}},
        response={"status": 200, "headers": {}, "chunks": chunks},
    )


def build_cassette(path: Path) -> Path:
    header = CassetteHeader(
        env_name="demo_env", env_file="environments/demo_env.py",
        command=["process", "--env.total_steps", "1"], endpoint_type="openai",
        model="scripted",
        tokenizer={"name": "hermes-replay-tiny", "fingerprint": "0123456789abcdef"},
    )
    ok = "train-aaaaaaaaaaaa-0-0"
    interactions = [
        _chat(ok, 0, [SYSTEM, USER], ASSISTANT_1),
        _chat(ok, 1, [SYSTEM, USER, ASSISTANT_1, TOOL], ASSISTANT_2),
        _sse("train-aaaaaaaaaaaa-0-1", 0, [SYSTEM, USER]),
        _chat("eval-bbbbbbbbbbbb-0-0", 0, [SYSTEM, USER, LONG_TOOL], ASSISTANT_2),
    ]
    outcomes = {
        ok: {"reward": 1.0, "turns_used": 2, "finished_naturally": True, "tool_errors": 0,
             "phase": "train", "messages": [SYSTEM, USER, ASSISTANT_1, TOOL, ASSISTANT_2]},
        "train-aaaaaaaaaaaa-0-1": {"reward": 0.0, "turns_used": 1, "phase": "train"},
        "eval-bbbbbbbbbbbb-0-0": {"reward": 0.5, "turns_used": 1, "phase": "eval"},
    }
    write_cassette(path, header, interactions, outcomes)
    return path


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    return build_cassette(tmp_path / "cassettes" / "demo_env" / "process.jsonl")


def test_ls_lists_header_and_rollouts(cassette: Path, capsys) -> None:
    assert main(["ls", str(cassette.parent.parent)]) == 0
    out = capsys.readouterr().out
    assert "env demo_env · model scripted · endpoint openai" in out
    assert "tokenizer hermes-replay-tiny (0123456789ab)" in out
    assert "\x1b[" not in out  # not a terminal: no colors
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.strip().startswith(("train-", "eval-"))}
    assert rows["train-aaaaaaaaaaaa-0-0"][1:] == ["train", "2", "1", "1.000"]
    assert rows["train-aaaaaaaaaaaa-0-1"][1:] == ["train", "1", "0", "0.000"]
    assert rows["eval-bbbbbbbbbbbb-0-0"][1:] == ["eval", "1", "0", "0.500"]
    assert "3 rollouts · 4 requests · mean reward 0.500" in out


def test_ls_missing_path_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["ls", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Next step" in err


def test_ls_empty_dir_says_nothing_recorded(tmp_path: Path, capsys) -> None:
    assert main(["ls", str(tmp_path)]) == 0
    assert "nothing recorded yet" in capsys.readouterr().out


def test_show_renders_transcript(cassette: Path, capsys) -> None:
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-0"]) == 0
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("── system", "── user", "── assistant · turn 1",
                                     "── tool result · terminal (call_1)",
                                     "── assistant · turn 2", "── outcome")]
    assert order == sorted(order)
    assert "→ tool call terminal  (id call_1)" in out
    assert 'command: "ls /data | wc -l"' in out  # pretty-printed arguments
    assert "I should count them with ls." in out  # reasoning
    assert "tools offered: terminal" in out
    assert "reward 1.000 · turns 2 · finished naturally · tool errors 0" in out
    assert "\x1b[" not in out


def test_show_prefix_streaming_and_truncation(cassette: Path, capsys) -> None:
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-1"]) == 0
    assert "I do not know." in capsys.readouterr().out  # rebuilt from SSE chunks
    assert main(["show", str(cassette), "--rollout", "eval-"]) == 0
    out = capsys.readouterr().out
    assert "more characters not shown; --full shows everything" in out
    assert "x" * 5000 not in out
    assert main(["show", str(cassette), "--rollout", "eval-", "--full"]) == 0
    assert "x" * 5000 in capsys.readouterr().out


def test_show_turn_and_raw(cassette: Path, capsys) -> None:
    # turns count from 1, as in miss reports, logs and diff: --turn 2 is the second request
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-0", "--turn", "2"]) == 0
    out = capsys.readouterr().out
    assert "(2 earlier messages not repeated)" in out
    assert "There are 3 files." in out and "You are a careful agent" not in out
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-0", "--turn", "1",
                 "--raw"]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert raw["request"]["body"]["messages"] == [SYSTEM, USER]
    assert main(["show", str(cassette), "--turn", "1"]) == 2
    assert "--turn needs --rollout ID" in capsys.readouterr().err
    assert main(["show", str(cassette), "--rollout", "eval-", "--turn", "5"]) == 2
    assert "out of range" in capsys.readouterr().err


def test_show_colors_only_on_a_tty_without_no_color(cassette: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-0"]) == 0
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["show", str(cassette), "--rollout", "train-aaaaaaaaaaaa-0-0"]) == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_show_unknown_rollout_names_the_existing_ones(cassette: Path, capsys) -> None:
    assert main(["show", str(cassette), "--rollout", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no rollout 'nope'" in err and "train-aaaaaaaaaaaa-0-0" in err
    assert main(["show", str(cassette), "--rollout", "train-"]) == 2
    assert "matches 2 rollouts" in capsys.readouterr().err


def test_show_bad_cassette_names_file_and_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header", "schema_version": 1}\nnot json\n', encoding="utf-8")
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2" in err and "next step" in err


def test_show_includes_requests_outside_rollouts(tmp_path: Path, capsys) -> None:
    path = tmp_path / "c.jsonl"
    judge = _chat(None, 0, [USER], {"role": "assistant", "content": '{"score": 0.7}'})
    write_cassette(path, CassetteHeader(), [judge], {})
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rollout (outside any rollout)" in out and '{"score": 0.7}' in out
    assert main(["ls", str(path)]) == 0
    assert "1 requests outside any rollout" in capsys.readouterr().out


def test_replay_all_skips_foreign_and_fails_on_missing_env(tmp_path: Path, capsys,
                                                          monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_cassette(tmp_path / "cassettes" / "api.jsonl", CassetteHeader(), [], {})
    assert main(["replay", "cassettes", "--out", "o"]) == 0
    out = capsys.readouterr().out
    assert "skipped: not recorded with `hermes-replay record`" in out and " skip" in out
    build_cassette(tmp_path / "cassettes" / "demo_env" / "process.jsonl")  # env file absent
    assert main(["replay", "cassettes", "--out", "o2"]) == 1
    captured = capsys.readouterr()
    # said once, in full (stderr); the summary's error line points at it
    assert (captured.out + captured.err).count(
        "recorded env file environments/demo_env.py was not found") == 1
    assert "error: shown above" in captured.out and "ERROR" in captured.out


def test_show_splits_a_judge_call_into_its_own_conversation(tmp_path: Path, capsys) -> None:
    rid = "train-cccccccccccc-0-0"
    judge_sys = {"role": "system", "content": "You are a strict grader."}
    interactions = [
        _chat(rid, 0, [SYSTEM, USER], ASSISTANT_1),
        _chat(rid, 1, [SYSTEM, USER, ASSISTANT_1, TOOL], ASSISTANT_2),
        _chat(rid, 2, [judge_sys, {"role": "user", "content": "Grade: There are 3 files."}],
              {"role": "assistant", "content": '{"score": 9}'}),
    ]
    path = tmp_path / "j.jsonl"
    write_cassette(path, CassetteHeader(), interactions, {rid: {"reward": 0.9}})  # no messages
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    order = [out.index(s) for s in ("── assistant · turn 1", "── tool result · terminal",
                                     "── assistant · turn 2", "another conversation in this "
                                     "rollout (request 2", "You are a strict grader.",
                                     "── assistant · turn 3", "── outcome")]
    assert order == sorted(order)
    assert main(["ls", str(path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if rid in line)
    assert row.split()[1:] == ["train", "3", "1", "0.900"]


def test_escape_sequences_from_a_cassette_never_reach_the_terminal(tmp_path: Path, capsys,
                                                                   monkeypatch) -> None:
    evil = "\x1b[2J\x1b[31mFAKE\x07"
    rid = "train-dddddddddddd-0-0"
    reply = {"role": "assistant", "content": f"ok {evil}", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": f"t{evil}", "arguments": json.dumps({"x": evil})}}]}
    path = tmp_path / "evil.jsonl"
    write_cassette(path, CassetteHeader(model=f"m{evil}"),
                   [_chat(rid, 0, [{"role": "user", "content": evil}], reply)],
                   {rid: {"reward": 1.0, "phase": f"train{evil}"}})
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)  # colors on
    monkeypatch.delenv("NO_COLOR", raising=False)
    for argv in (["show", str(path)], ["ls", str(path)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b[2J" not in out and "\x07" not in out
        assert "\\x1b[2J" in out


def test_show_folds_phase2_token_ids_into_decoded_text(tmp_path: Path, capsys) -> None:
    """``/generate`` bodies carry token-id lists: shown as the decoded prompt and completion
    text; a body of another shape keeps its ids folded into one line each; the ids
    themselves with ``--raw``."""
    import httpx
    from tokenizers import Tokenizer

    import hermes_replay
    from hermes_replay._tokenizers.bundled import tokenizer_path
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    tokenizer = Tokenizer.from_file(str(Path(tokenizer_path()) / "tokenizer.json"))
    ids = tokenizer.encode("What is the sum of the squares of 1 through 10?").ids
    path = tmp_path / "phase2.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("train-p2-0-0"):
            hermes_replay.annotate(
                tokenizer=hermes_replay.describe_tokenizer(hermes_replay.bundled_tokenizer_path()))
            httpx.post(ep.root_url + "/generate", timeout=60, json={
                "prompt": {"prompt_token_ids": ids}, "logprobs": 0, "n": 1, "max_tokens": 32})
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\n  What is the sum of the squares of 1 through 10?\n" in out  # the prompt, as text
    assert "── completion · turn 1" in out and " tokens · finish " in out
    assert f"  {ids[3]},\n" not in out  # no column of ids
    # a body of a shape not read as prompt/completion keeps its ids folded, decoded
    from hermes_replay._tokenizers.fold import fold_token_lists

    folded = fold_token_lists({"input_ids": ids}, lambda xs: tokenizer.decode(xs))
    assert folded == {"input_ids": f"⟨{len(ids)} token ids⟩ 'What is the sum of the squares "
                                   "of 1 through 10?'"}
    assert main(["show", str(path), "--raw"]) == 0
    raw = capsys.readouterr().out
    assert json.loads(raw)["request"]["body"]["prompt"]["prompt_token_ids"] == ids
