"""``hermes-replay report``: what the page holds for each kind of input, and what it refuses.

The page's data is the JSON the page script renders; these tests read it back from the written
file. What a browser makes of it is proven in ``test_report_browser.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _report_inputs import (
    MULTI,
    SHIPPED,
    changed_copy,
    planted_copy,
    project,
    recordings,
    state_of,
    tool_result_changed,
)

from hermes_replay._cassette import load_cassette
from hermes_replay._cassette.verify import verify_file
from hermes_replay._report import ReportRefused, write_report
from hermes_replay.cli import main


def _rows(state: dict) -> dict[str, dict]:
    return {row["id"]: row for row in state["rows"]}


def test_a_cassette_folder_gives_every_recorded_rollout_with_its_reward(tmp_path):
    shipped = recordings(tmp_path / "shipped")
    out = write_report(shipped, tmp_path / "r.html")
    state = state_of(out.read_text(encoding="utf-8"))
    expected = {}
    for path in sorted(shipped.rglob("*.jsonl")):
        for rid, rec in load_cassette(path).rollouts.items():
            expected[rid] = rec.outcome.get("reward")
    assert expected, "the shipped cassettes hold rollouts"
    rows = _rows(state)
    assert {rid: rows[rid]["reward"] for rid in rows} == expected
    assert len(state["sections"]) == 6  # three environments × process/evaluate
    assert not state["compared"]
    for section in state["sections"]:
        assert section["charts"]["rewards"]["data"], section["title"]
        assert section["charts"]["groups"]["data"], section["title"]


def test_transcripts_fold_tool_calls_and_flag_tool_errors(tmp_path):
    state = state_of(write_report(MULTI, tmp_path / "r.html").read_text(encoding="utf-8"))
    rows = _rows(state)
    record = load_cassette(MULTI).rollouts
    with_errors = [rid for rid, rec in record.items() if rec.outcome.get("tool_errors")]
    assert with_errors, "the shipped multi-signal cassette has a rollout with a tool error"
    rid = with_errors[0]
    messages = state["transcripts"][rows[rid]["key"]]["messages"]
    calls = [c for m in messages for c in m.get("calls", [])]
    assert calls and rows[rid]["calls"] == len(calls)
    errors = [m for m in messages if m.get("error")]
    assert errors and all(m["role"] == "tool" for m in errors)
    assert rows[rid]["errors"] == record[rid].outcome["tool_errors"]
    # assistant messages carry the request they answered, so a turn can be marked
    assert [m["turn"] for m in messages if m["role"] == "assistant"] == list(
        range(len(record[rid].interactions)))


def test_recorded_tool_calls_show_those_the_reward_made_and_a_changed_answer_is_drift(
        tmp_path):
    source = SHIPPED / "terminal_test_env" / "process.jsonl"
    rid, seq = tool_result_changed(source, tmp_path / "after.jsonl")
    recorded = [c for c in load_cassette(source).tool_calls if c.rollout == rid]
    state = state_of(write_report(tmp_path / "after.jsonl", tmp_path / "r.html",
                                  against=source).read_text(encoding="utf-8"))
    rows = _rows(state)
    tools = state["transcripts"][rows[rid]["key"]]["tools"]
    assert [(t["seq"], t["source"], t["name"]) for t in tools] == [
        (c.seq, c.source, c.name) for c in recorded]
    assert any(t["source"] == "reward" for t in tools)  # calls no message shows
    changed = next(t for t in tools if t["seq"] == seq)
    assert changed["error"] == "exit code 1"
    assert "FAILED (changed)" in state["strings"][changed["result"]]
    # the conversation is the same; the tool's answer is where the two recordings part
    # (a call the reward made answers no turn: it is placed in the reward)
    when = ("the reward" if recorded[seq].source != "agent"
            else f"turn {recorded[seq].turn + 1}")
    assert rows[rid]["drift"].startswith(f"{when}: tool call {seq} (")
    assert rows[rid]["status"] == "drift"
    assert sum(1 for r in rows.values() if r["drift"]) == 1


def test_against_shows_reward_deltas_and_the_first_diverging_turn(tmp_path):
    cassette = load_cassette(MULTI)
    ids = sorted(cassette.rollouts)
    moved, drifted = ids[0], ids[4]
    old_reward = cassette.rollouts[moved].outcome["reward"]
    changed = changed_copy(tmp_path / "after.jsonl", reward_of=moved,
                           new_reward=old_reward - 0.5, reply_of=drifted, reply_turn=0,
                           new_reply="I give up.")
    state = state_of(write_report(changed, tmp_path / "r.html",
                                  against=MULTI).read_text(encoding="utf-8"))
    rows = _rows(state)
    assert state["compared"]
    assert rows[moved]["before"] == old_reward
    assert rows[moved]["delta"] == pytest.approx(-0.5)
    assert rows[moved]["status"] == "changed"
    assert rows[drifted]["drift"].startswith("turn 1: response.message")  # turns count from 1
    diverge = state["transcripts"][rows[drifted]["key"]]["diverge"]
    assert diverge["turn"] == 0 and "I give up." in diverge["diff"]
    unchanged = [r for r in rows.values() if r["id"] not in (moved, drifted)]
    assert unchanged and all(r["status"] == "same" for r in unchanged)
    assert state["sections"][0]["summary"]["changed"] == 1


def test_a_replay_output_folder_is_compared_with_its_recordings(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    out = tmp_path / "replayed"
    assert main(["replay", str(MULTI), "--out", str(out)]) == 0
    state = state_of(write_report(out, tmp_path / "r.html").read_text(encoding="utf-8"))
    rows = _rows(state)
    recorded = {rid: rec.outcome["reward"] for rid, rec in load_cassette(MULTI).rollouts.items()}
    assert {rid: r["before"] for rid, r in rows.items()} == recorded
    assert {rid: r["reward"] for rid, r in rows.items()} == recorded  # same code: no change
    assert all(r["delta"] == 0 for r in rows.values())
    # the process run's scored groups give each rollout its training tokens and masks
    with_tokens = [t for t in state["transcripts"].values() if t["tokens"]]
    assert len(with_tokens) == len(rows)
    tokens = with_tokens[0]["tokens"]
    assert set(tokens["trained"]) == {"0", "1"}  # the prompt is masked, replies are trained
    assert all(str(i) in state["vocab"] for i in tokens["ids"])


def test_replay_prints_its_report_and_the_report_shows_the_misses(tmp_path, monkeypatch,
                                                                  capsys):
    root = project(tmp_path / "project")
    rid = sorted(load_cassette(MULTI).rollouts)[2]
    # the recording says the user asked something else: the replayed request has no match
    planted_copy(root / "cassettes" / "multi" / "process.jsonl", rid, "(asked differently)")
    monkeypatch.chdir(root)
    assert main(["replay", "cassettes", "--out", "out"]) == 1
    printed = capsys.readouterr().out
    assert f"report: {Path('out') / 'report.html'}" in printed.splitlines()
    state = state_of((root / "out" / "report.html").read_text(encoding="utf-8"))
    rows = _rows(state)
    assert rows[rid]["misses"] >= 1 and rows[rid]["status"] == "miss"
    misses = state["transcripts"][rows[rid]["key"]]["misses"]
    assert misses[0]["seq"] == 0  # the first request (messages call it turn 1)
    assert "differs from the recording" in misses[0]["text"] and "(asked differently)" in \
        misses[0]["text"]
    assert all(r["misses"] == 0 for r in rows.values() if r["id"] != rid)
    assert state["sections"][0]["summary"]["misses"] == rows[rid]["misses"]
    # its reward moved too (the env scored a rollout whose request failed): counted as changed
    moved = sum(1 for r in rows.values() if r["delta"])
    assert state["sections"][0]["summary"]["changed"] == moved


def test_a_planted_api_key_is_shown_redacted_and_verify_flags_it(tmp_path):
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    rid = sorted(load_cassette(MULTI).rollouts)[0]
    planted = planted_copy(tmp_path / "planted.jsonl", rid, f"my key is {key}")
    assert any(f.kind == "secret" for f in verify_file(planted))
    html = write_report(planted, tmp_path / "r.html").read_text(encoding="utf-8")
    assert key not in html and key[:20] not in html
    state = state_of(html)
    assert any("my key is <redacted:openai-key>" in s for s in state["strings"])


def test_a_private_key_block_is_redacted_in_the_report_and_verify_flags_it(tmp_path):
    block = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzq9PLANTEDPLANTEDx1\n"
             "-----END RSA PRIVATE KEY-----")
    rid = sorted(load_cassette(MULTI).rollouts)[0]
    planted = planted_copy(tmp_path / "planted.jsonl", rid, block)
    assert any("private key" in f.message for f in verify_file(planted))
    html = write_report(planted, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "PLANTED" not in html and "redacted:private-key" in html


def test_a_secret_redaction_cannot_rewrite_refuses_the_report(tmp_path, capsys):
    """What only verify's broader scan calls a secret (a random token where a credential
    sits, under a name no rule knows) makes the report refuse, naming the next step."""
    from hermes_replay._report._scrub import scrub

    token = "Zq8" + "mT4vW9xR2kL7pN3bY6cH1fJ5dG0sA8e"
    with pytest.raises(ReportRefused) as info:
        scrub({"request": {"headers": {"x-trace": token}}}, [str(tmp_path / "c.jsonl")])
    assert "hermes-replay verify" in str(info.value) and token not in str(info.value)


def test_the_cli_never_overwrites_a_file_that_is_not_a_report(tmp_path, capsys):
    victim = tmp_path / "notes.html"
    victim.write_text("<html>my notes</html>", encoding="utf-8")
    assert main(["report", str(MULTI), "-o", str(victim)]) == 2
    assert "not a hermes-replay report" in capsys.readouterr().err
    assert victim.read_text(encoding="utf-8") == "<html>my notes</html>"
    report = tmp_path / "report.html"
    assert main(["report", str(MULTI), "-o", str(report)]) == 0
    assert main(["report", str(MULTI), "-o", str(report)]) == 0  # its own report: replaced
    assert str(report) in capsys.readouterr().out


def test_bad_input_names_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(MULTI.read_text(encoding="utf-8").splitlines()[0] + "\n{not json\n",
                   encoding="utf-8")
    assert main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2" in err and "next step" in err
    assert main(["report", str(tmp_path / "nothing-here"), "-o", str(tmp_path / "r.html")]) == 2


def test_without_the_report_extra_the_cli_names_it(tmp_path):
    # plotly made unimportable in a fresh interpreter: the core install has no plotly
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'plotly' or name.startswith('plotly.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from hermes_replay._report import report_line\n"
        f"print(report_line({str(tmp_path)!r}))\n"  # what replay (and probe) print instead
        "from hermes_replay.cli import main\n"
        f"sys.exit(main(['report', {str(MULTI)!r}, '-o', {str(tmp_path / 'r.html')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "hermes-replay[report]" in proc.stderr and "plotly" in proc.stderr
    assert proc.stdout.startswith("report: not written") and "hermes-replay[report]" in \
        proc.stdout
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "report.html").exists()
