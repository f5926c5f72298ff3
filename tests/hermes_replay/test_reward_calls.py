"""One cause, one miss: an LLM judge's requests are reward calls — recorded as such, numbered as
``show`` numbers them, replayed and diffed against the recorded reward calls only — and a
miss that follows an agent turn's miss in the same rollout is reported as its consequence.

The env (``tests/judge_clock_env.py``) has the time in its system prompt and a judge in its
reward; a minute later every agent turn 1 misses, and so does every judge call (it grades the
answer the agent no longer gave)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _controlled_clock import Clock

from hermes_replay import load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent.parent
ENV_REL = "environments/judge_clock_env.py"
CASSETTE_REL = "cassettes/judge_clock_env/process.jsonl"
ARGS = ["process", "--env.total_steps", "1", "--env.group_size", "2",
        "--env.data_path_to_save_groups", "data/groups.jsonl"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "environments").mkdir()
    shutil.copy(HERE / "judge_clock_env.py", tmp_path / ENV_REL)
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _record(clock: Clock) -> None:
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        assert main(["record", ENV_REL, "--endpoint", ep.base_url, "--model", "m",
                     "--server-type", "openai", "--", *ARGS]) == 0


def test_judge_calls_are_recorded_and_shown_as_reward_calls(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _record(Clock(monkeypatch))
    cassette = load_cassette(CASSETTE_REL)
    for record in cassette.rollouts.values():
        turns = record.outcome["turns_used"]
        stages = [i.stage for i in record.interactions]
        assert stages == [None] * turns + ["reward"], stages  # the judge's call, marked
    rid = sorted(cassette.rollouts)[0]
    capsys.readouterr()
    assert main(["show", CASSETTE_REL, "--rollout", rid]) == 0
    shown = capsys.readouterr().out
    turns = cassette.rollouts[rid].outcome["turns_used"]
    assert f"reward call 1 (request {turns + 1})" in shown


def test_a_changed_prompt_is_one_cause_per_rollout_and_the_judge_a_consequence(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    clock = Clock(monkeypatch)
    _record(clock)
    cassette = load_cassette(CASSETTE_REL)
    rid = sorted(cassette.rollouts)[0]
    judge_request = cassette.rollouts[rid].outcome["turns_used"] + 1
    capsys.readouterr()
    clock.advance(minutes=1)
    assert main(["replay", CASSETTE_REL, "--out", "out"]) == 1
    err = capsys.readouterr().err
    assert "4 request(s) had no matching recording (2 cause(s); 2 follow from an earlier miss)" \
        in err
    # the causes: each rollout's turn 1, diffed against its turn 1, naming the fix
    assert f"rollout '{rid}', turn 1: POST /v1/chat/completions" in err
    assert err.count("--- recorded (rollout ") == 2
    assert "it matches the recording once datetime values are normalized" in err
    assert f"hermes-replay normalize {CASSETTE_REL} --add datetime" in err
    # the judge's calls: labelled as reward calls, consequences, never diffed as turn 1
    assert f"reward call 1 of rollout '{rid}': POST /v1/chat/completions — after rollout " \
           f"'{rid}', turn 1" in err
    assert "max_tokens" not in err  # 100 (judge) vs 2048 (agent) was the old, wrong diff

    # -v: the consequence too, with its diff against the recorded reward call
    assert main(["replay", CASSETTE_REL, "--out", "out-v", "-v"]) == 1
    verbose = capsys.readouterr().err
    assert f"recorded (reward call 1 of rollout {rid}, request {judge_request})" in verbose
    assert f"follows from the miss at rollout '{rid}', turn 1" in verbose

    # with the normalizer the proposal named, agent turns and judge calls all match again
    assert main(["normalize", CASSETTE_REL, "--add", "datetime"]) == 0
    assert main(["replay", CASSETTE_REL, "--out", "fixed"]) == 0, capsys.readouterr().err


def test_cassettes_recorded_before_stages_infer_the_judge_from_turns_used(
        project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A cassette written before reward calls were marked: the requests after the agent's
    last turn (``turns_used``) are its reward calls, as ``show`` and replay number them."""
    import json

    clock = Clock(monkeypatch)
    _record(clock)
    path = Path(CASSETTE_REL)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for r in records:
        r.pop("stage", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    clock.advance(minutes=1)
    capsys.readouterr()
    assert main(["replay", CASSETTE_REL, "--out", "out"]) == 1
    err = capsys.readouterr().err
    assert "(2 cause(s); 2 follow from an earlier miss)" in err and "reward call 1 of" in err


def test_a_rollout_reporting_no_turns_keeps_its_requests_as_agent_turns(tmp_path: Path) -> None:
    """A cassette this recorder wrote says in its header that it marks reward calls, so an
    unmarked request is the agent's even in a rollout that reported ``turns_used=0`` and made
    no reward call (the ``seq >= turns_used`` inference of older cassettes took it for a
    reward call: replay then said the cassette had no such rollout while naming it)."""
    import openai

    import hermes_replay

    path = tmp_path / "c.jsonl"

    def ask(base: str) -> None:
        client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
        with hermes_replay.rollout("r0") as scope:
            client.chat.completions.create(model="m", messages=[{"role": "user",
                                                                  "content": "hi"}])
            scope.report(reward=1.0, turns_used=0, finished_naturally=True, phase="train")

    with ScriptedEndpoint(script="generic", seed=0) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            ask(base)
    cassette = load_cassette(path)
    assert cassette.header.extra["stages"] is True
    assert [i.stage for i in cassette.interactions] == [None]
    with hermes_replay.cassette(path, "replay") as session:
        ask(base)
    assert not session.summary().misses and not session.summary().unused
