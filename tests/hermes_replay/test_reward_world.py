"""Reward truth for rewards that read the sandbox (issue 44): the workspace is recorded, a
replay serves a reward-side tool result only over an agent side that replayed exactly, a
changed reward is re-scored offline in the recorded world, and ``--missing-only`` never mixes
recorded agent results with live reward calls.

Every reward checked here is recomputed independently from the rollout's own recorded agent
command with the env's rule (``_world_project.expected_reward``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _recorded_project import recorded_project_fixtures
from _world_project import (
    CASSETTE_REL,
    edit_env,
    expected_reward,
    item_answer,
    make_project,
    record,
    rollouts,
    workspace_files,
    written_value,
)

from hermes_replay.cli import main

pytestmark = pytest.mark.xdist_group("reward_world")


recorded, project = recorded_project_fixtures(make_project, record)


def _replay(capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["replay", CASSETTE_REL, "--out", "out", *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_record_keeps_each_rollouts_workspace_as_its_reward_found_it(project: Path) -> None:
    recs = rollouts()
    assert len(recs) == 4
    values = set()
    for rid, rec in recs.items():
        assert rec.outcome["workspace"]["v"] == 2  # a tree of shared folder listings
        value = written_value(rec)
        values.add(value)
        content = workspace_files(rec)["answer.txt"].decode()
        assert content == value + "\n", rid  # the agent's own command wrote exactly this
        reward_cat = next(c for c in rec.tool_calls if c.source == "reward")
        assert reward_cat.result["output"] == content  # what the reward read is what was kept
        assert rec.outcome["reward"] == pytest.approx(expected_reward(rec, item_answer(rec)))
    assert len(values) == 2, values  # right and wrong answers both occur


def test_an_unchanged_replay_executes_nothing(project: Path, capsys) -> None:
    code, out = _replay(capsys)
    assert code == 0, out
    assert "tool calls: 8 answered from the cassette, 0 executed" in out
    assert "re-scored" not in out


def test_a_parser_change_fails_instead_of_serving_a_world_never_built(
        project: Path, capsys) -> None:
    """The agent's calls no longer parse, no tool runs: the reward's ``cat answer.txt`` must not
    be answered from the recording (that world does not exist) and the replay must fail."""
    edit_env(project, 'PARSER = "hermes"', 'PARSER = "mistral"')
    code, out = _replay(capsys)
    assert code == 1, out
    assert "MISS" in out
    assert "recorded terminal {\"command\": \"echo" in out and "→ now not called" in out
    assert "a world this run's agent never built" in out
    assert "tool call(s) could not be answered from the recording" in out
    assert "request(s) had no matching recording" not in out  # worded as tool calls


def test_a_changed_reward_command_is_rescored_in_the_recorded_world(
        project: Path, recorded: Path, tmp_path: Path, capsys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    edit_env(project, 'REWARD_COMMAND = "cat answer.txt"',
             'REWARD_COMMAND = "head -c 3 answer.txt"')
    code, out = _replay(capsys, "--fail-on-change")
    assert "re-scored from the recorded workspace: 4 rollout(s), 4 reward tool call(s)" in out
    import json

    rows = json.loads((project / "out" / "process" / "result.json").read_text())
    replayed = {r["id"]: r["reward"] for r in rows["rollouts"]}
    recs = rollouts()
    for rid, rec in recs.items():  # the env's rule on the rollout's own file, read by head -c 3
        want = expected_reward(rec, item_answer(rec), read=lambda text: text[:3].strip())
        assert replayed[rid] == pytest.approx(want), rid
    assert code == (1 if any(replayed[r] != recs[r].outcome["reward"] for r in recs) else 0)

    # and the same as a full live re-record with the changed env gives, rollout by rollout
    live = tmp_path / "live"
    shutil.copytree(recorded, live, symlinks=True)
    (live / CASSETTE_REL).unlink()
    edit_env(live, 'REWARD_COMMAND = "cat answer.txt"', 'REWARD_COMMAND = "head -c 3 answer.txt"')
    monkeypatch.chdir(live)
    assert record() == 0
    fresh = {rid: rec.outcome["reward"] for rid, rec in rollouts().items()}
    assert fresh == pytest.approx(replayed)


def test_rescoring_needs_a_recorded_workspace_and_says_how_to_get_one(
        project: Path, capsys) -> None:
    path = project / CASSETTE_REL
    lines = path.read_text().splitlines()
    import json

    out_lines = []
    for line in lines:
        record = json.loads(line)
        if record.get("type") == "outcome":
            record.pop("workspace", None)
        out_lines.append(json.dumps(record))
    path.write_text("\n".join(out_lines) + "\n")
    edit_env(project, 'REWARD_COMMAND = "cat answer.txt"', 'REWARD_COMMAND = "wc -c answer.txt"')
    code, out = _replay(capsys)
    assert code == 1, out
    assert "keeps no workspace for rollout" in out
    assert "--missing-only" in out


def test_missing_only_after_a_reward_change_rescores_and_keeps_the_agent_side(
        project: Path, capsys) -> None:
    before = rollouts()
    edit_env(project, 'REWARD_COMMAND = "cat answer.txt"',
             'REWARD_COMMAND = "head -c 3 answer.txt"')
    assert record("--cassette", CASSETTE_REL, "--missing-only") == 0
    after = rollouts()
    assert set(after) == set(before)
    for rid, rec in after.items():
        agent = [(c.arguments, c.result) for c in rec.tool_calls if c.source == "agent"]
        assert agent == [(c.arguments, c.result) for c in before[rid].tool_calls
                         if c.source == "agent"]
        reward = [c for c in rec.tool_calls if c.source == "reward"]
        assert [c.arguments["command"] for c in reward] == ["head -c 3 answer.txt"]
        assert reward[0].origin == "rescored"  # marked: run offline in the recorded workspace
        assert all(c.origin is None for c in rec.tool_calls if c.source == "agent")
        assert reward[0].result["output"] == (written_value(rec) + "\n")[:3]
        assert rec.outcome["reward"] == pytest.approx(
            expected_reward(rec, item_answer(rec), read=lambda text: text[:3].strip()))
    assert main(["replay", CASSETTE_REL, "--out", "out2"]) == 0  # and it replays offline
    capsys.readouterr()
    assert main(["show", CASSETTE_REL, "--rollout", sorted(after)[0]]) == 0
    assert "· re-scored offline in the recorded workspace" in capsys.readouterr().out


def test_missing_only_after_a_prompt_change_rerecords_each_rollout_whole(
        project: Path, capsys) -> None:
    """Every agent turn is new: the reward must read the world this run's agent built, never
    the recorded one (the old harness matched the unchanged ``cat`` to the old recording)."""
    edit_env(project, "You are a careful assistant with a terminal.", "You are terse.")
    capsys.readouterr()
    assert record("--cassette", CASSETTE_REL, "--missing-only") == 0
    out = capsys.readouterr()
    assert "re-recorded whole: 4 rollout(s)" in out.out + out.err
    for rid, rec in rollouts().items():
        assert rec.interactions[0].request["body"]["messages"][0]["content"] == "You are terse."
        reward = [c for c in rec.tool_calls if c.source == "reward"]
        value = written_value(rec)
        assert reward[0].result["output"] == ("" if value is None else value + "\n"), rid
        assert ("answer.txt" in workspace_files(rec)) == (value is not None)
        assert rec.outcome["reward"] == pytest.approx(expected_reward(rec, item_answer(rec)))
    assert main(["replay", CASSETTE_REL, "--out", "out2"]) == 0


def test_rescoring_runs_with_the_network_off(project: Path, capsys) -> None:
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    reached: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                reached.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        probe = ("python -I -c \"import socket; socket.create_connection(('127.0.0.1', "
                 f"{port}), timeout=2)\"; cat answer.txt")
        edit_env(project, 'REWARD_COMMAND = "cat answer.txt"', f"REWARD_COMMAND = {probe!r}")
        _, out = _replay(capsys)
        assert "re-scored from the recorded workspace: 4 rollout(s)" in out, out
    finally:
        stop.set()
        thread.join()
        server.close()
    assert reached == []  # four reward commands ran, none reached a port on this machine


@pytest.fixture
def pytest_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "pyproj")
    edit_env(root, 'CHECK = "cat"', 'CHECK = "pytest"')
    monkeypatch.chdir(root)
    assert record() == 0
    return root


def test_a_pytest_reward_replays_and_a_changed_test_is_rescored(
        pytest_project: Path, capsys) -> None:
    recs = rollouts()
    for rid, rec in recs.items():  # pytest in the sandbox passed exactly where the file is right
        assert rec.outcome["reward"] == pytest.approx(expected_reward(rec, item_answer(rec))), rid
    code, out = _replay(capsys)
    assert code == 0 and "0 executed" in out, out
    # the hidden test now accepts any number over 1000: only the pytest run changed
    edit_env(pytest_project, "read_text().strip() == '{answer}'",
             "read_text().strip().isdigit() and int(pathlib.Path('answer.txt').read_text()) > 1000")
    code, out = _replay(capsys)
    assert "re-scored from the recorded workspace: 4 rollout(s), 8 reward tool call(s)" in out, out
    import json

    rows = json.loads((pytest_project / "out" / "process" / "result.json").read_text())
    replayed = {r["id"]: r["reward"] for r in rows["rollouts"]}
    for rid, rec in recs.items():
        want = expected_reward(rec, 0, read=lambda text: "0" if int(text) > 1000 else "no")
        assert replayed[rid] == pytest.approx(want), rid


def test_a_former_layer_evaluate_keeps_its_sandbox_and_records_its_rollouts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``HermesAgentLoop`` without a task id, then ``ToolContext(agent.task_id)`` after
    ``run()``: the agent's files are there, and each loop is a rollout with its reward."""
    root = make_project(tmp_path / "former")
    monkeypatch.chdir(root)
    from _world_project import ENV_REL, WORLD

    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    with ScriptedEndpoint(script=str(WORLD / "answer_script.toml"), seed=0) as ep:
        assert main(["record", ENV_REL, "--endpoint", ep.base_url, "--model", "m",
                     "--server-type", "openai", "--", "evaluate",
                     "--env.data_dir_to_save_evals", "evals"]) == 0
    cassette = "cassettes/answer_env/evaluate.jsonl"
    recs = rollouts(cassette)
    assert len(recs) == 2 and all(r.startswith("loop-") for r in recs)
    for rid, rec in recs.items():
        sources = [c.source for c in rec.tool_calls]
        assert sources == ["agent", "reward"], rid  # the reward's cat is in the rollout
        assert rec.outcome["reward"] == pytest.approx(expected_reward(rec, item_answer(rec)))
        assert rec.tool_calls[1].result["output"] == written_value(rec) + "\n"
    capsys.readouterr()
    assert main(["replay", cassette, "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert "2 rollouts replayed" in out


def test_record_without_a_sandbox_fails_and_keeps_the_old_cassette(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """No bubblewrap: every tool call fails; the recording must not be written as if the
    model had done badly (the old harness wrote it with mean reward 0.200 and exit 0)."""
    from environments.tools.sandbox import isolation

    before = (project / CASSETTE_REL).read_bytes()
    monkeypatch.setattr(isolation, "bwrap_problem", lambda: "bwrap not found on PATH")
    capsys.readouterr()
    code = record()
    out = capsys.readouterr()
    text = out.out + out.err
    assert code != 0, text
    assert "sandbox could not be created" in text and "bwrap not found on PATH" in text
    assert "apt-get install bubblewrap" in text
    assert (project / CASSETTE_REL).read_bytes() == before


def test_check_flags_a_cassette_of_isolation_errors(tmp_path: Path) -> None:
    from hermes_replay._cassette import CassetteHeader
    from hermes_replay._cassette.toolcalls import ToolCall
    from hermes_replay._cassette.write import write_cassette
    from hermes_replay._check._runs import isolation_failures

    path = tmp_path / "c.jsonl"
    calls = [ToolCall(rollout="r", seq=0, turn=0, name="terminal", arguments={"command": "ls"},
                      raised={"type": "IsolationUnavailableError",
                              "args": ["commands must run inside bubblewrap"]}),
             ToolCall(rollout="r", seq=1, turn=0, source="reward", name="terminal",
                      arguments={"command": "cat a"}, result={"exit_code": 0, "output": "1"})]
    write_cassette(path, CassetteHeader(), [], {"r": {"reward": 0.2}}, calls)
    said = isolation_failures([path])
    assert said is not None and said.startswith("1 of 2 recorded tool results are sandbox")
    write_cassette(path, CassetteHeader(), [], {"r": {"reward": 0.2}}, calls[1:])
    assert isolation_failures([path]) is None


def test_show_lists_the_workspace_the_reward_found(project: Path, capsys) -> None:
    rid, rec = sorted(rollouts().items())[0]
    capsys.readouterr()
    assert main(["show", CASSETTE_REL, "--rollout", rid]) == 0
    out = capsys.readouterr().out
    size = len(written_value(rec)) + 1
    assert "── workspace (as the reward found it) ──" in out
    assert f"    answer.txt  {size} B" in out
    assert '"sha256"' not in out and '"tree"' not in out  # not dumped as raw JSON


AUTO_TEST = """
import pytest

@pytest.mark.cassette("cassettes/answer_env/process.jsonl")
def test_answer(replay_run):
    assert len(replay_run().rollouts) == 4
"""


def test_pytest_auto_mode_rescores_a_changed_reward_and_writes_it(
        recorded: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest --replay-mode auto`` takes the same path as ``record --missing-only``: the
    changed reward runs in each rollout's recorded workspace (no endpoint), and is written."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    root = pytester.path
    shutil.copytree(recorded, root, symlinks=True, dirs_exist_ok=True)
    main(["trust", str(root)])
    pytester.makepyfile(test_answer=AUTO_TEST)
    edit_env(root, 'REWARD_COMMAND = "cat answer.txt"',
             'REWARD_COMMAND = "head -c 3 answer.txt"')
    result = pytester.runpytest("--replay-mode", "auto", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    for rid, rec in rollouts(root / CASSETTE_REL).items():
        reward = [c for c in rec.tool_calls if c.source == "reward"]
        assert [c.arguments["command"] for c in reward] == ["head -c 3 answer.txt"], rid
        assert rec.outcome["reward"] == pytest.approx(
            expected_reward(rec, item_answer(rec), read=lambda text: text[:3].strip()))
