"""Dynamic checks of `hermes-replay check`: output analysis on hand-made data, then one live and
one offline run of a real example environment against the scripted endpoint (127.0.0.1 only)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from hermes_replay._check import Target, check_env
from hermes_replay._check._outputs import (
    Vocab,
    check_eval_dir,
    check_eval_requests,
    check_groups,
    check_rewards,
    sample_rewards,
)
from hermes_replay._check._runs import ModeRun, analyse_runs, cassettes_by_mode, set_flag

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "environments" / "terminal_test_env.py"

# A ChatML-like toy vocabulary: enough to exercise the per-role mask check without a tokenizer.
PIECES = ["<|im_start|>", "system", "user", "assistant", "tool", "\n", "a", "b", "c", "d",
          "<|im_end|>"]
VOCAB = Vocab(len(PIECES), 0, lambda ids: "".join(PIECES[i] for i in ids))
SYSTEM = [0, 1, 5, 6, 10, 5]
USER = [0, 2, 5, 7, 10, 5]
ASSISTANT_HEADER = [0, 3, 5]
ASSISTANT_BODY = [8, 9, 10]


def sequence() -> tuple[list[int], list[int]]:
    prompt = SYSTEM + USER + ASSISTANT_HEADER
    tokens = prompt + ASSISTANT_BODY + [5]
    masks = [-100] * len(prompt) + ASSISTANT_BODY + [-100]
    return tokens, masks


def group(tokens=None, masks=None, scores=(0.5,)) -> dict:
    t, m = sequence()
    return {"tokens": [tokens or t], "masks": [masks or m], "scores": list(scores)}


def messages(problems):
    return [(sev, msg) for sev, msg in problems]


# -- process output ------------------------------------------------------------------------------


def test_good_group_passes():
    assert check_groups([group()], VOCAB) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t, m: ([*t[:3], 1.0, *t[4:]], m), "token 3 is 1.0, not an int"),
        (lambda t, m: ([*t[:3], 99, *t[4:]], m), "id 99, outside the tokenizer's vocabulary"),
        (lambda t, m: (t, m[:-1]), "19 tokens but 18 mask entries"),
        (lambda t, m: (t, [*m[:3], 7, *m[4:]]), "mask 3 is 7"),
        (lambda t, m: (t, [*m[:9], t[9], *m[10:]]), "token 9 is trained on but belongs to a user"),
        (lambda t, m: (t, [*m[:13], t[13], *m[14:]]), "token 13 of the assistant header"),
    ],
    ids=["float-token", "out-of-vocab", "mask-length", "mask-value", "user-trained",
         "header-trained"],
)
def test_bad_sequences_fail_with_where(change, expected):
    tokens, masks = change(*sequence())
    problems = check_groups([group(tokens, masks)], VOCAB)
    assert len(problems) == 1
    severity, message = problems[0]
    assert severity == "fail"
    assert message.startswith("group 0 rollout 0: ")
    assert expected in message


def test_scores_and_shapes():
    assert messages(check_groups([group(scores=(1.5,))], VOCAB)) == [
        ("fail", "group 0 rollout 0: score 1.5 is not in [0, 1]")]
    assert check_groups([group(scores=(0.1, 0.2))], VOCAB)[0][1].startswith(
        "group 0: 1 token sequences, 1 mask sequences, 2 scores")
    assert check_groups([], VOCAB)[0][0] == "fail"
    tokens, _ = sequence()
    assert check_groups([group(tokens, [-100] * len(tokens))], VOCAB)[0][0] == "warn"


def test_without_chatml_only_the_prompt_start_is_checked():
    plain = Vocab(len(PIECES), None, VOCAB.decode)
    tokens, masks = sequence()
    assert check_groups([group(tokens, masks)], plain) == []
    assert check_groups([group(tokens, [tokens[0], *masks[1:]])], plain)[0][0] == "fail"


# -- evaluate output -----------------------------------------------------------------------------


def test_eval_dir(tmp_path):
    assert "wrote no metrics.json" in check_eval_dir(tmp_path)[0][1]
    (tmp_path / "metrics.json").write_text(json.dumps({"results": {"all": {}}}))
    assert "holds no metric" in check_eval_dir(tmp_path)[0][1]
    (tmp_path / "metrics.json").write_text(json.dumps({"results": {"all": {"eval/x": 1.0}}}))
    assert check_eval_dir(tmp_path)[0][0] == "warn"  # no samples.jsonl
    (tmp_path / "samples.jsonl").write_text("{}\n")
    assert check_eval_dir(tmp_path) == []


def chat(tools=True, tool_result=True) -> dict:
    msgs = [{"role": "user", "content": "q"}]
    if tool_result:
        msgs.append({"role": "tool", "content": "ok", "tool_call_id": "c1"})
    body = {"messages": msgs, **({"tools": [{"type": "function"}]} if tools else {})}
    return {"url": "http://127.0.0.1:1/v1/chat/completions", "body": body}


def test_eval_requests():
    assert check_eval_requests([chat(), chat(tool_result=False)]) == []
    severity, message = check_eval_requests([chat(tools=False), chat(tools=False)])[0]
    assert severity == "fail" and "none of evaluate's 2 chat requests offered tools" in message
    assert check_eval_requests([chat(tool_result=False)])[0][0] == "warn"
    assert check_eval_requests([{"url": "http://h/generate", "body": {}}])[0][0] == "warn"
    severity, message = check_eval_requests([])[0]
    assert severity == "warn" and "run_eval_rollouts" in message


def test_rewards():
    assert check_rewards([("a", 0.0), ("b", 1.0)]) == []
    assert check_rewards([("a", 0.2), ("b", 3.0), ("c", float("nan"))])[0] == (
        "fail", "2 reward(s) outside [0, 1]: b: 3.0, c: nan")
    assert check_rewards([("a", 0.5), ("b", 0.5)])[0][0] == "warn"
    assert check_rewards([("a", 0.5)])[0][0] == "warn"
    assert check_rewards([])[0][0] == "fail"
    assert sample_rewards([{"reward": 1}, {"score": 0}, {"x": 2}]) == [
        ("eval sample 0", 1), ("eval sample 1", 0)]


# -- plumbing ------------------------------------------------------------------------------------


def test_set_flag_replaces_both_forms():
    argv = ["process", "--a", "1", "--b=2", "--c", "3"]
    assert set_flag(argv, "--a", "X") == ["process", "--b=2", "--c", "3", "--a", "X"]
    assert set_flag(argv, "--b", "Y") == ["process", "--a", "1", "--c", "3", "--b", "Y"]


def test_cassettes_by_mode_reads_headers(tmp_path):
    def cassette(name, command):
        path = tmp_path / name
        path.write_text(json.dumps({"type": "header", "command": command}) + "\n")
        return path

    proc = cassette("a.jsonl", ["process", "--env.total_steps", "1"])
    cassette("b.jsonl", ["evaluate"])
    (tmp_path / "data.jsonl").write_text('{"tokens": []}\n')
    assert cassettes_by_mode(proc) == {"process": proc, "evaluate": tmp_path / "b.jsonl"}
    assert cassettes_by_mode(tmp_path) == {"process": proc, "evaluate": tmp_path / "b.jsonl"}


def test_failed_and_skipped_runs_are_reported(tmp_path):
    process = ModeRun("process", exit_code=1, log_tail="CassetteMiss: rollout train-x turn 2",
                      header={"type": "header"},
                      command=["python", "-m", "hermes_replay.cli", "replay", "env.py", "--",
                               "process"])
    evaluate = ModeRun("evaluate", skipped="no evaluate cassette at c.jsonl: record one")
    rows = analyse_runs("env.py", Target(cassette=tmp_path), process, evaluate)
    by_rule = {r.rule: r for r in rows}
    assert by_rule["process"].status == "fail"
    assert by_rule["process"].findings[0].message == (
        "process replayed with exit code 1: CassetteMiss: rollout train-x turn 2")
    assert by_rule["process"].findings[0].fix.startswith(
        "reproduce it with `hermes-replay replay env.py -- process`; a cassette miss means")
    assert by_rule["evaluate"].status == "warn"
    assert by_rule["evaluate"].findings[0].fix.startswith("record an evaluate cassette next to")
    assert by_rule["rewards"].status == "warn"


# -- end to end against the scripted endpoint (slow: whole env CLIs in subprocesses) --------------

OVERPAID = '''\
    """The terminal example with a reward outside [0, 1]; same requests, so its cassette fits."""

    from environments.terminal_test_env import TerminalTestEnv


    class OverpaidEnv(TerminalTestEnv):
        async def compute_reward(self, item, result, ctx):
            return 3.0 + await super().compute_reward(item, result, ctx)


    if __name__ == "__main__":
        OverpaidEnv.cli()
    '''


@pytest.mark.slow
def test_live_then_offline(tmp_path):
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    assert EXAMPLE.is_file(), "the terminal example environment is missing"
    keep = tmp_path / "kept"
    with ScriptedEndpoint(script="examples", seed=0) as endpoint:
        live = check_env(EXAMPLE, target=Target(endpoint=endpoint.base_url, model="scripted"),
                         keep=keep)
    dynamic = {r.rule: r for r in live if r.kind == "dynamic"}
    assert {k: r.status for k, r in dynamic.items()} == dict.fromkeys(
        ("import", "process", "evaluate", "rewards", "rerun"), "pass"), [
        f.message for r in dynamic.values() for f in r.findings]
    assert (keep / "process.jsonl").is_file() and (keep / "evaluate.jsonl").is_file()

    overpaid = tmp_path / "overpaid_env.py"
    overpaid.write_text(textwrap.dedent(OVERPAID))
    offline = check_env(overpaid, target=Target(cassette=keep))  # no endpoint is running now
    rows = {r.rule: r for r in offline if r.kind == "dynamic"}
    assert rows["import"].status == "pass"
    assert rows["process"].status == "fail"
    assert re.search(r"score [34]\.0 is not in \[0, 1\]", rows["process"].findings[0].message)
    assert rows["evaluate"].status == "pass"
    assert rows["rewards"].status == "fail"
    assert "outside [0, 1]" in rows["rewards"].findings[0].message


def test_a_missing_mode_names_the_folder_and_what_it_holds(tmp_path, monkeypatch):
    """``check`` on a folder with only a process cassette said "no evaluate cassette at
    …/process.jsonl" — naming the process cassette as the missing one; the command it proposes
    names the env file as the user typed it, not by its absolute path."""
    from hermes_replay._check._runs import run_mode

    monkeypatch.chdir(tmp_path)
    proc = tmp_path / "process.jsonl"
    proc.write_text(json.dumps({"type": "header", "command": ["process"]}) + "\n")
    run = run_mode(Path("env.py"), "evaluate", Target(cassette=proc), tmp_path / "w")
    assert run.skipped is not None
    assert run.skipped.startswith(f"no evaluate cassette in {tmp_path} (it holds process only)")
    assert "process.jsonl" not in run.skipped
    assert "`hermes-replay record env.py --endpoint URL --model M -- evaluate …`" in run.skipped
