"""Forking a recorded rollout at turn K and continuing it live (issue 48), with the scripted
endpoint as the stand-in model.

Every expectation comes from an independent oracle: the parent cassette read directly (its
turns, its tool calls, its workspace), the files and reward recomputed from a rollout's own
recorded commands with the env's rule (``_fork_project``), and what the endpoint was sent —
never from the fork's own summary."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from _fork_project import (
    CASSETTE_REL,
    ENV_REL,
    SCRIPT,
    expected_reward,
    files_written,
    make_project,
    record,
    rollouts,
    workspace_files,
)
from _recorded_project import recorded_project_fixtures

from hermes_replay import ForkError, fork_rollout, load_cassette
from hermes_replay._fork.plan import agent_turns, rollout_fingerprint
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.xdist_group("fork")


recorded, project = recorded_project_fixtures(make_project, record)


def _fork(capsys: pytest.CaptureFixture, ep: ScriptedEndpoint, *extra: str,
          rollout: str, turn: int = 4) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["fork", CASSETTE_REL, "--rollout", rollout, "--turn", str(turn),
                 "--endpoint", ep.base_url, "--model", "m", *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _rid() -> str:
    return sorted(rollouts())[0]


def _bodies(record: Any, upto: int) -> list[tuple[Any, Any]]:
    return [(i.request["body"], i.response["body"]) for i in agent_turns(record)[:upto]]


def _chat_requests(ep: ScriptedEndpoint) -> list[dict[str, Any]]:
    return [body for path, body in ep.requests if path.endswith("/chat/completions")]


def _replays_offline(capsys: pytest.CaptureFixture, branch: Path, out: Path) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["replay", str(branch), "--out", str(out)])
    text = capsys.readouterr()
    assert code == 0, text.out + text.err
    result = json.loads(next(out.glob("*/result.json")).read_text())
    assert result["misses"] == [] and result["unused"] == []
    return {r["id"]: r["reward"] for r in result["rollouts"]}


def test_a_fork_at_turn_4_keeps_the_prefix_and_sandbox_continues_live_and_replays_offline(
        project: Path, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = rollouts()
    rid = _rid()
    other = next(r for r in parent if r != rid)
    assert len(agent_turns(parent[rid])) == 6
    key = "sk-fork-test-" + "k3y9" * 6
    monkeypatch.setenv("FORK_TEST_KEY", key)
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        code, out = _fork(capsys, ep, "--api-key-env", "FORK_TEST_KEY", rollout=rid)
        sent = _chat_requests(ep)
        assert set(ep.authorizations[-len(sent):]) == {f"Bearer {key}"}  # the key was used
    assert code == 0, out
    branch_path = Path(CASSETTE_REL).with_name(f"process.fork-{rid}-t4.jsonl")
    assert branch_path.is_file()
    branch = load_cassette(branch_path)
    mine = branch.rollouts[rid]

    # the first three turns are the parent's, request and reply, as recorded
    assert _bodies(mine, 3) == _bodies(parent[rid], 3)
    # turns 4.. went to the endpoint, and only those: the one forked rollout's live part
    live = agent_turns(mine)[3:]
    assert len(sent) == len(live) >= 1
    # what the model saw at turn 4 is exactly the recorded conversation up to it
    assert sent[0]["messages"] == agent_turns(parent[rid])[3].request["body"]["messages"]

    # the sandbox at turn 4 is the recording's: the prefix's files, as its commands wrote them
    prefix = files_written(parent[rid], before_turn=4)
    assert prefix == {"a.txt": "one\n", "b.txt": "two\n", "c.txt": "three\n"}
    kept = workspace_files(mine, branch_path)
    recorded = workspace_files(parent[rid], CASSETTE_REL)
    for name, content in prefix.items():
        assert kept[name].decode() == content == recorded[name].decode()
    # and the live turn 5 read them there, beside what the live turn 4 wrote
    look = next(c for c in mine.tool_calls if c.source == "agent" and "cat a.txt" in
                c.arguments["command"])
    d_now = files_written(mine)["d.txt"]
    assert json.loads(look.result)["output"] == "one\ntwo\nthree\n" + d_now
    assert kept["d.txt"].decode() == d_now

    # the reward ran live, on the branch's own world: the env's rule on its own commands
    assert mine.outcome["reward"] == pytest.approx(expected_reward(mine))
    reward_call = next(c for c in mine.tool_calls if c.source == "reward")
    assert reward_call.result["output"] == d_now

    # every other rollout of the run is the parent's, untouched
    assert _bodies(branch.rollouts[other], 6) == _bodies(parent[other], 6)
    assert branch.rollouts[other].outcome["reward"] == parent[other].outcome["reward"]

    link = branch.header.extra["fork"]
    assert link["parent"] == "process.jsonl" and link["rollout"] == rid and link["turn"] == 4
    assert link["parent_fingerprint"] == rollout_fingerprint(parent[rid])
    assert f"rollout {rid} at turn 4" in out

    rewards = _replays_offline(capsys, branch_path, tmp_path / "out")
    assert rewards[rid] == pytest.approx(expected_reward(mine))
    assert key not in branch_path.read_text() and key not in out  # and written nowhere


def test_samples_continue_three_times_from_one_prefix_and_show_the_spread(
        project: Path, capsys) -> None:
    rid = _rid()
    with ScriptedEndpoint(script=SCRIPT, seed=3) as ep:
        code, out = _fork(capsys, ep, "--samples", "3", rollout=rid)
        sent = _chat_requests(ep)
    assert code == 0, out
    paths = sorted(Path(CASSETTE_REL).parent.glob(f"process.fork-{rid}-t4-s*.jsonl"))
    assert [p.name[-9:] for p in paths] == ["-s1.jsonl", "-s2.jsonl", "-s3.jsonl"]
    parent = rollouts()[rid]
    rewards = []
    live_turns = 0
    for path in paths:
        mine = load_cassette(path).rollouts[rid]
        assert _bodies(mine, 3) == _bodies(parent, 3)
        assert mine.outcome["reward"] == pytest.approx(expected_reward(mine))
        rewards.append(expected_reward(mine))
        live_turns += len(agent_turns(mine)) - 3
        assert load_cassette(path).header.extra["fork"]["sample"] == f"{path.name[-7]}/3"
    assert len(sent) == live_turns  # three live continuations, nothing else sent
    # the same prefix three times: the endpoint drew three samples for one identical request
    firsts = [json.dumps(b["messages"]) for b in sent if len(b["messages"]) == len(
        sent[0]["messages"])]
    assert len(firsts) == 3 and len(set(firsts)) == 1
    mean = sum(rewards) / 3
    assert f"reward over 3 samples: mean {mean:.3f}" in out
    assert f"[{min(rewards):.3f}–{max(rewards):.3f}]" in out


def test_a_replaced_tool_result_changes_the_continuation(project: Path, capsys,
                                                        tmp_path: Path) -> None:
    rid = _rid()
    text = "REPLACED: the disk is full"
    (tmp_path / "answer.txt").write_text(text)
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        code, out = _fork(capsys, ep, "--replace-message", f"4=@{tmp_path / 'answer.txt'}",
                          rollout=rid)
        sent = _chat_requests(ep)
    assert code == 0, out
    assert sent[0]["messages"][-1] == {**sent[0]["messages"][-1], "role": "tool",
                                       "content": text}
    recorded = agent_turns(rollouts()[rid])[3].request["body"]["messages"]
    assert sent[0]["messages"][:-1] == recorded[:-1]  # only that message differs
    assert recorded[-1]["content"] != text
    branch_path = Path(CASSETTE_REL).with_name(f"process.fork-{rid}-t4.jsonl")
    mine = load_cassette(branch_path).rollouts[rid]
    assert files_written(mine)["d.txt"] == "replaced\n"  # the script's answer to that result
    assert mine.outcome["reward"] == pytest.approx(expected_reward(mine)) == 0.0
    replaced = [c for c in mine.tool_calls if c.origin == "replaced"]
    assert [c.result for c in replaced] == [text] and replaced[0].turn == 2
    _replays_offline(capsys, branch_path, tmp_path / "out")


def test_a_drifting_tool_is_reported_and_strict_stops_at_it(tmp_path: Path, capsys,
                                                            monkeypatch) -> None:
    root = make_project(tmp_path / "stamped", task="stamped steps")
    monkeypatch.chdir(root)
    assert record() == 0
    rid = _rid()
    stamp = next(c for c in rollouts()[rid].tool_calls if "date" in c.arguments["command"])
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        code, out = _fork(capsys, ep, "--strict", rollout=rid)
        assert code == 1, out
        assert "cannot fork" in out and f"tool call {stamp.seq}" in out and "--strict" in out
        assert not list(Path(CASSETTE_REL).parent.glob("*.fork-*"))  # nothing written
        assert _chat_requests(ep) == []  # stopped before anything went live
        code, out = _fork(capsys, ep, rollout=rid)
    assert code == 0, out
    drift = [line for line in out.splitlines() if "drift:" in line]
    assert len(drift) == 1 and f"tool call {stamp.seq} (terminal)" in drift[0]


def test_where_a_fork_cannot_work_it_says_why_and_what_to_do(project: Path, capsys) -> None:
    rid = _rid()
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        code, out = _fork(capsys, ep, rollout=rid, turn=7)
        assert code == 1 and "turn 7 is beyond the rollout: it has 6 turns" in out
        assert "next step: pick --turn 2..6" in out
        code, out = _fork(capsys, ep, rollout=rid, turn=1)
        assert code == 1 and "turn 1 has no recorded prefix" in out
        code, out = _fork(capsys, ep, rollout="train-nope-0-0")
        assert code == 1 and "has no rollout 'train-nope-0-0'" in out and rid in out
        code, out = _fork(capsys, ep, "--replace-message", "3=x", rollout=rid)
        assert code == 1 and "--replace-message names turn 3" in out
        capsys.readouterr()
        code = main(["fork", CASSETTE_REL, "--rollout", rid, "--turn", "4", "--endpoint",
                     ep.base_url, "--model", "other"])
        err = capsys.readouterr().err
        assert code == 1 and "name model 'm', not 'other'" in err and "--model m" in err
        # an env changed since the recording cannot resume where the recording was
        env = Path(ENV_REL)
        env.write_text(env.read_text().replace("one file per turn", "a file per turn"))
        code, out = _fork(capsys, ep, rollout=rid)
        assert code == 1 and "no longer matches the recording" in out
        assert "cannot resume at turn 4" in out and "next step:" in out
        assert _chat_requests(ep) == []  # the prefix missed: nothing went live
    assert not list(Path(CASSETTE_REL).parent.glob("*.fork-*"))
    capsys.readouterr()
    assert main(["fork", CASSETTE_REL, "--rollout", rid, "--turn", "4"]) == 2
    assert "no inference endpoint given" in capsys.readouterr().err


def test_a_one_request_rollout_and_untracked_tools_are_refused(tmp_path: Path,
                                                               recorded: Path) -> None:
    from hermes_replay._cassette import CassetteHeader, Interaction
    from hermes_replay._cassette.write import write_cassette

    plain = tmp_path / "plain.jsonl"
    inter = Interaction(rollout="train-abc-0", seq=0, kind="chat",
                        request={"method": "POST", "url": "http://x/v1/chat/completions",
                                 "body": {"messages": [], "n": 2}},
                        response={"status": 200, "body": {"choices": []}})
    write_cassette(plain, CassetteHeader(env_file="e.py"), [inter],
                   {"train-abc-0": {"kind": "group", "rollouts": ["train-abc-0-0"]},
                    "train-abc-0-0": {"reward": 1.0, "choice": 0}})
    for rid in ("train-abc-0", "train-abc-0-0"):
        with pytest.raises(ForkError, match=r"nothing to fork.*plain BaseEnv") as err:
            fork_rollout(plain, rid, 2, base_url="http://127.0.0.1:9/v1", model="m")
        assert "next step:" in str(err.value)
    # a Hermes rollout whose tools ran outside the seam: its sandbox cannot be rebuilt
    parent = load_cassette(recorded / CASSETTE_REL)
    bare = tmp_path / "bare.jsonl"
    write_cassette(bare, parent.header, parent.interactions, parent.outcomes, [])
    rid = sorted(parent.rollouts)[0]
    with pytest.raises(ForkError, match="cannot be rebuilt and the env cannot resume"):
        fork_rollout(bare, rid, 4, base_url="http://127.0.0.1:9/v1", model="m")


def test_a_branch_keeps_its_parent_link_through_compact_merge_verify_and_report(
        project: Path, capsys, tmp_path: Path) -> None:
    rid = _rid()
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        assert _fork(capsys, ep, rollout=rid)[0] == 0
    branch = Path(CASSETTE_REL).with_name(f"process.fork-{rid}-t4.jsonl")
    link = load_cassette(branch).header.extra["fork"]
    compacted = tmp_path / "c.jsonl.zst"
    assert main(["compact", str(branch), "-o", str(compacted)]) == 0
    assert load_cassette(compacted).header.extra["fork"] == link
    merged = tmp_path / "m.jsonl"
    assert main(["merge", str(branch), "-o", str(merged)]) == 0
    assert load_cassette(merged).header.extra["fork"] == link
    capsys.readouterr()
    assert main(["verify", str(branch), str(compacted), str(merged)]) == 0
    page = tmp_path / "r.html"
    pytest.importorskip("jinja2")
    assert main(["report", str(branch), "-o", str(page)]) == 0
    html = page.read_text()
    assert re.search(r"forked from .*process\.jsonl", html) and f"turn {link['turn']}" in html


def test_the_forked_fixture_proves_what_the_agent_does_from_turn_k(
        recorded: Path, pytester: pytest.Pytester) -> None:
    """A user's test: from turn 4 of this recording, the fixed model (a script whose turn 4
    always writes ``four``) makes the agent write ``four`` and earns the full reward."""
    for part in ("environments", "cassettes"):
        shutil.copytree(recorded / part, pytester.path / part)
    (pytester.path / "pyproject.toml").write_text("")
    script = Path(SCRIPT).read_text()
    fixed = re.sub(r'(name = "d"\n\[rules.when\]\nturn = 3\n)(.*?)(\n\[\[rules\]\])',
                   r'\1[rules.reply]\ntool_calls = [{ name = "terminal", arguments = '
                   r'{ command = "echo four > d.txt" } }]\n\3', script, flags=re.S)
    assert fixed.count("echo four") == 1 and "echo FOUR" not in fixed
    (pytester.path / "fixed_model.toml").write_text(fixed)
    rid = sorted(load_cassette(recorded / CASSETTE_REL).rollouts)[0]
    pytester.makepyfile(test_branch=f'''
import pytest

@pytest.mark.fork("{CASSETTE_REL}", rollout="{rid}", turn=4, script="fixed_model.toml")
def test_from_turn_4_the_agent_writes_four(forked):
    [branch] = forked.branches
    assert branch.commands()[0] == "echo four > d.txt"
    assert branch.reward == 1.0 and branch.path.is_file()
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_show_draws_a_branch_beside_its_parent_and_diff_starts_at_turn_k(
        project: Path, capsys) -> None:
    rid = _rid()
    with ScriptedEndpoint(script=SCRIPT, seed=7) as ep:
        code, out = _fork(capsys, ep, "--replace-message", "4=REPLACED: nothing", rollout=rid)
    assert code == 0, out
    branch_path = Path(CASSETTE_REL).with_name(f"process.fork-{rid}-t4.jsonl")
    parent, mine = rollouts()[rid], load_cassette(branch_path).rollouts[rid]

    def command(record: Any, turn: int) -> str:  # the rollout's own call after turn N
        return next(c.arguments["command"] for c in record.tool_calls
                    if c.source == "agent" and c.turn == turn - 1)

    capsys.readouterr()
    assert main(["show", str(branch_path), "--rollout", rid]) == 0
    shown = capsys.readouterr().out
    assert f"forked from process.jsonl at turn 4 of rollout {rid}" in shown
    assert "turns 1..3 above are the parent's (replayed, shown once)" in shown
    assert shown.count("echo one > a.txt") == 2  # the prefix once (its message and its call)
    side = shown[shown.index("── forked at turn 4"):].splitlines()
    for turn in (4, 5):
        row = next(line for line in side if line.startswith(f"  {turn} "))
        assert command(parent, turn) in row and command(mine, turn) in row
    assert command(parent, 4) != command(mine, 4) == "echo replaced > d.txt"
    rewards = next(line for line in side if line.startswith("  reward "))
    assert rewards.split()[1:] == [f"{expected_reward(parent):.3f}",
                                   f"{expected_reward(mine):.3f}"]

    assert main(["diff", CASSETTE_REL, str(branch_path)]) == 1
    diff = capsys.readouterr().out
    assert f"rollout {rid} forked at turn 4; turns 1..3 are equal (shared)" in diff
    assert re.search(rf"{re.escape(rid)} .*· turn 4 · request\.messages", diff)
