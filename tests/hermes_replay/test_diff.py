"""``hermes-replay diff`` and ``hermes_replay._diff.compare``: shipped cassettes against copies
changed
through the core's reader/writer (never by editing JSON text), and replay results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_replay._cassette import Interaction, load_cassette, write_cassette
from hermes_replay._diff.compare import compare, compare_paths, load_view, view_from_result
from hermes_replay._runner.result import RolloutOutcome, RunResult
from hermes_replay._runner.result_io import load_run_result, write_run_result
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROCESS = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"
EVALUATE = ROOT / "cassettes" / "multi_signal_env" / "evaluate.jsonl"


def _copy(src: Path, dst: Path, *, outcomes=None, interactions=None) -> Path:
    """Re-write ``src`` at ``dst`` with the core's writer, optionally changed."""
    c = load_cassette(src)
    outs = {rid: dict(o) for rid, o in c.outcomes.items()}
    if outcomes:
        outcomes(outs)
    inters = list(c.interactions)
    if interactions:
        inters = interactions(inters)
    kept = {i.rollout for i in inters} | set(outs)  # a dropped rollout loses its tool calls
    write_cassette(dst, c.header, inters, outs, [t for t in c.tool_calls if t.rollout in kept])
    return dst


def _first_rollout(path: Path) -> str:
    return next(iter(load_cassette(path).rollouts))


def _change_reply(inters: list[Interaction], rollout: str, seq: int, text: str):
    out = []
    for inter in inters:
        if inter.rollout == rollout and inter.seq == seq:
            body = json.loads(json.dumps(inter.response["body"]))
            msg = body["choices"][0]["message"]
            msg["content"] = text
            msg.pop("tool_calls", None)
            inter = inter.model_copy(update={"response": {**inter.response, "body": body}})
        out.append(inter)
    return out


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["diff", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_identical_cassettes_exit_0(tmp_path, capsys):
    copy = _copy(PROCESS, tmp_path / "copy.jsonl")  # a rewrite, not the same file
    code, out, _ = run_cli(capsys, PROCESS, copy)
    assert code == 0
    assert "no differences" in out
    assert "12 rollouts, 30 turns" in out
    assert "\x1b[" not in out  # not a terminal: no colors


def test_changed_reward_exit_1_names_rollout_and_both_rewards(tmp_path, capsys):
    rid = _first_rollout(PROCESS)
    old = load_cassette(PROCESS).rollouts[rid].outcome["reward"]

    def bump(outs):
        outs[rid]["reward"] = old + 0.25

    copy = _copy(PROCESS, tmp_path / "b.jsonl", outcomes=bump)
    code, out, _ = run_cli(capsys, PROCESS, copy)
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith(rid))
    assert f"{old:.3f}" in row and f"{old + 0.25:.3f}" in row and "+0.250" in row
    assert "rollouts: 1 of 12 changed" in out
    assert "1 reward(s) changed" in out
    # the derived train mean moves by 0.25 / 12
    assert "rollouts:train/mean_reward" in out


def test_changed_assistant_message_reports_first_diverging_turn(tmp_path, capsys):
    rid = next(r for r, rec in load_cassette(PROCESS).rollouts.items()
               if len(rec.interactions) >= 3)
    copy = _copy(PROCESS, tmp_path / "b.jsonl",
                 interactions=lambda inters: _change_reply(inters, rid, 1, "I give up."))
    code, out, _ = run_cli(capsys, PROCESS, copy)
    assert code == 1
    assert f"{rid} · turn 2 · response.message.content" in out
    assert '+response.message.content: "I give up."' in out  # every line names its field
    assert "--- A" in out and "+++ B" in out
    report = compare_paths(PROCESS, copy)
    assert [(d.rollout, d.turn) for d in report.divergences] == [(rid, 2)]
    assert report.changes == []  # outcomes untouched: only the transcript differs


def test_changed_request_message_names_the_message_index(tmp_path):
    rid = _first_rollout(PROCESS)

    def edit(inters):
        out = []
        for inter in inters:
            if inter.rollout == rid and inter.seq == 0:
                body = json.loads(json.dumps(inter.request["body"]))
                body["messages"][-1]["content"] += " (edited)"
                inter = inter.model_copy(update={"request": {**inter.request, "body": body}})
            out.append(inter)
        return out

    report = compare_paths(PROCESS, _copy(PROCESS, tmp_path / "b.jsonl", interactions=edit))
    (div,) = report.divergences
    assert div.turn == 1
    assert div.field.startswith("request.messages[") and div.field.endswith("].content")
    assert "(edited)" in div.diff


def test_missing_turn_and_missing_rollout(tmp_path):
    c = load_cassette(PROCESS)
    rid = next(r for r, rec in c.rollouts.items() if len(rec.interactions) == 3)
    gone = list(c.rollouts)[-1]

    def drop(inters):
        return [i for i in inters if not (i.rollout == rid and i.seq == 2) and i.rollout != gone]

    def drop_outcome(outs):
        del outs[gone]

    report = compare_paths(PROCESS, _copy(PROCESS, tmp_path / "b.jsonl", interactions=drop,
                                          outcomes=drop_outcome))
    assert report.only_a == [gone] and report.only_b == []
    (div,) = report.divergences
    assert (div.rollout, div.turn) == (rid, 3)
    assert "turn 3 only in A" in div.field


def test_eval_metric_delta(tmp_path, capsys):
    c = load_cassette(EVALUATE)
    rewards = {rid: o["reward"] for rid, o in c.outcomes.items()}
    rid = sorted(rewards)[0]

    def lower(outs):
        outs[rid]["reward"] = rewards[rid] - 0.2

    copy = _copy(EVALUATE, tmp_path / "b.jsonl", outcomes=lower)
    report = compare_paths(EVALUATE, copy)
    (metric,) = report.metrics
    old_mean = sum(rewards.values()) / len(rewards)
    assert metric.name == "rollouts:eval/mean_reward"
    assert metric.a == pytest.approx(old_mean)
    assert metric.delta == pytest.approx(-0.2 / len(rewards))
    code, out, _ = run_cli(capsys, EVALUATE, copy)
    assert code == 1
    assert "metrics: 1 of" in out and "rollouts:eval/mean_reward" in out


def test_json_schema(tmp_path, capsys):
    rid = _first_rollout(PROCESS)

    def zero(outs):
        outs[rid]["reward"] = 0.5
        outs[rid]["turns_used"] = 9

    copy = _copy(PROCESS, tmp_path / "b.jsonl", outcomes=zero,
                 interactions=lambda i: _change_reply(i, rid, 0, "changed"))
    code, out, _ = run_cli(capsys, PROCESS, copy, "--json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc) == {"schema_version", "equal", "a", "b", "compared_rollouts", "rewards",
                        "only_in_a", "only_in_b", "divergences", "tool_divergences", "metrics",
                        "notes", "request_misses"}
    assert doc["schema_version"] == 1 and doc["equal"] is False
    assert doc["a"] == {"path": str(PROCESS), "kind": "cassette", "env_name": "terminal-test",
                        "rollouts": 12, "misses": []}
    (change,) = doc["rewards"]
    assert change["rollout"] == rid and change["b"] == 0.5
    assert change["delta"] == pytest.approx(0.5 - change["a"])
    assert change["fields"]["turns"]["b"] == 9
    (div,) = doc["divergences"]
    assert set(div) == {"rollout", "turn", "field", "diff", "changes"}  # changes: every field
    assert (div["rollout"], div["turn"]) == (rid, 1)
    assert div["field"].startswith("response.message")
    assert {"name", "a", "b", "delta"} <= set(doc["metrics"][0])

    code, out, _ = run_cli(capsys, PROCESS, PROCESS, "--json")
    assert code == 0 and json.loads(out)["equal"] is True


@pytest.mark.parametrize("content", [None, "{not json\n", '{"type": "header"}\n'])
def test_unreadable_input_exit_2_names_the_file(tmp_path, capsys, content):
    bad = tmp_path / "broken.jsonl"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    code, out, err = run_cli(capsys, PROCESS, bad)
    assert code == 2
    assert out == ""
    assert str(bad) in err
    assert "next step" in err


def test_usage_error_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["diff", str(PROCESS)])
    assert exc.value.code == 2


def _result_of(path: Path, **changes: float) -> RunResult:
    c = load_cassette(path)
    rollouts = [RolloutOutcome.from_outcome(rid, {**o, "reward": changes.get(rid, o["reward"])})
                for rid, o in c.outcomes.items()]
    return RunResult(rollouts=rollouts, env_name=c.header.env_name, cassette=path,
                     eval_metrics={"eval/mean_reward": 0.55, "eval/correctness": 0.5})


def test_result_json_round_trip_and_cassette_vs_result(tmp_path, capsys):
    result = _result_of(EVALUATE)
    written = write_run_result(result, tmp_path / "run")
    assert written == tmp_path / "run" / "result.json"
    back = load_run_result(written)
    assert back.rewards == result.rewards and back.eval_metrics == result.eval_metrics
    # a cassette has no metrics.json: the result's reported metrics are not a difference
    code, out, _ = run_cli(capsys, EVALUATE, tmp_path / "run")
    assert code == 0, out
    # the result says it replayed this cassette with no miss: its transcripts are the recorded
    assert "transcripts: every request of B" in out and "transcripts not compared" not in out


def test_two_results_metric_and_reward_deltas(tmp_path, capsys):
    a = _result_of(EVALUATE)
    rid = a.rollouts[0].id
    b = _result_of(EVALUATE, **{rid: 0.0})
    b.eval_metrics["eval/correctness"] = 0.25
    write_run_result(a, tmp_path / "a.json")
    write_run_result(b, tmp_path / "b.json")
    report = compare(load_view(tmp_path / "a.json"), load_view(tmp_path / "b.json"))
    assert [c.rollout for c in report.changes] == [rid]
    names = {m.name: m for m in report.metrics}
    assert names["eval/correctness"].delta == pytest.approx(-0.25)
    code, out, _ = run_cli(capsys, tmp_path / "a.json", tmp_path / "b.json")
    assert code == 1 and "eval/correctness" in out and "-0.2500" in out


def test_result_misses_count_as_difference():
    a = view_from_result(_result_of(EVALUATE), "a")
    b_result = _result_of(EVALUATE)
    b_result.misses = ["cassette: rollout 'x', turn 1: POST /v1/chat/completions"]
    report = compare(a, view_from_result(b_result, "b"))
    assert not report.equal
    assert any("1 replay miss" in n for n in report.notes)


def test_evaluate_output_folder(tmp_path):
    evals = tmp_path / "out" / "evals"
    evals.mkdir(parents=True)
    c = load_cassette(EVALUATE)
    (evals / "metrics.json").write_text(json.dumps(
        {"results": {"all": {"eval/mean_reward": 0.55}}}), encoding="utf-8")
    (evals / "samples.jsonl").write_text("".join(
        json.dumps({"rollout_id": rid, "reward": o["reward"]}) + "\n"
        for rid, o in c.outcomes.items()), encoding="utf-8")
    report = compare_paths(EVALUATE, tmp_path / "out")
    assert report.equal, report.to_json()
    assert report.compared_rollouts == len(c.outcomes)


def test_colors_only_on_a_tty(monkeypatch):
    from hermes_replay._diff.render import render_report
    from hermes_replay._terminal.render import Style

    report = compare(view_from_result(_result_of(EVALUATE), "a"),
                     view_from_result(_result_of(EVALUATE, **{
                         _first_rollout(EVALUATE): 0.0}), "b"))
    colored = "\n".join(render_report(report, Style(color=True)))
    plain = "\n".join(render_report(report, Style(color=False)))
    assert "\x1b[" in colored and "\x1b[" not in plain

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    assert Style(Tty()).color is False


def test_requests_outside_rollouts_are_compared(tmp_path):
    c = load_cassette(PROCESS)
    inter = c.rollouts[_first_rollout(PROCESS)].interactions[0]
    judge = inter.model_copy(update={"rollout": None, "seq": 0})
    a = _copy(PROCESS, tmp_path / "a.jsonl", interactions=lambda i: [judge, *i])
    changed = _change_reply([judge.model_copy(update={"rollout": "x"})], "x", 0, "verdict: no")
    b = _copy(PROCESS, tmp_path / "b.jsonl", interactions=lambda i: [
        changed[0].model_copy(update={"rollout": None}), *i])
    (div,) = compare_paths(a, b).divergences
    assert (div.rollout, div.turn) == ("<no rollout>", 1)
    assert div.field.startswith("response.message.content")


def test_real_replay_result_equals_its_cassette(tmp_path, capsys):
    """End to end: replay a shipped cassette, save result.json, diff it against the cassette."""
    from hermes_replay._runner.run import run_cassette

    result = run_cassette(EVALUATE, out_dir=tmp_path / "run", strict=True)
    assert result.exit_code == 0 and result.eval_metrics
    write_run_result(result, tmp_path / "run")
    code, out, _ = run_cli(capsys, EVALUATE, tmp_path / "run")
    assert code == 0, out
    assert f"no differences ({len(result.rollouts)} rollouts" in out
    # the env's own evaluate output folder reads the same way
    code, out, _ = run_cli(capsys, EVALUATE, tmp_path / "run" / "evals")
    assert code == 0, out


@pytest.mark.parametrize("path", sorted((ROOT / "cassettes").glob("*/*.jsonl")),
                         ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_every_shipped_cassette_equals_its_rewrite(path, tmp_path):
    report = compare_paths(path, _copy(path, tmp_path / "copy.jsonl"))
    assert report.equal, report.to_json()
    assert report.compared_rollouts == len(load_cassette(path).rollouts) > 0
