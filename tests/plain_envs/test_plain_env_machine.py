"""What the harness settles for a plain env on this machine, and the bound on empty groups.

- ``managed_server`` over an OpenAI endpoint: atroposlib refuses it unless
  ``ATROPOS_ALLOW_DUMMY_MANAGED_SERVER`` is set; the harness sets it for the run only and warns,
  once, that the tokens are placeholders.
- An env whose ``score()`` drops every group makes atroposlib's ``process`` loop retry forever
  (and ``serve`` draw items forever while the trainer waits); record, passthrough and replay stop
  after ``HERMES_REPLAY_MAX_EMPTY_GROUPS`` empty groups in a row, saying why and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _plain_script import plain_script
from _trajectory_api import trajectory_api

from hermes_replay import bundled_tokenizer_path, load_cassette
from hermes_replay._runner.plain_groups import MAX_EMPTY_VARIABLE
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TOKENIZER = ["--env.tokenizer_name", str(bundled_tokenizer_path())]


@pytest.fixture(autouse=True)
def _here(monkeypatch):
    monkeypatch.chdir(HERE)
    monkeypatch.delenv("ATROPOS_ALLOW_DUMMY_MANAGED_SERVER", raising=False)
    yield
    import wandb

    if wandb.run is not None:
        wandb.finish()


def test_managed_server_over_openai_is_handled_with_one_warning(tmp_path, capsys):
    cassette = tmp_path / "dummy.jsonl"
    flags = ["process", *TOKENIZER, "--env.total_steps", "2", "--env.group_size", "2"]
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", "managed_regex_env.py", "--cassette", str(cassette),
                     "--endpoint", endpoint.base_url, "--model", "scripted", "--",
                     *flags, "--env.data_path_to_save_groups", str(tmp_path / "rec.jsonl")])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert out.out.count("DummyManagedServer") == 1  # named once, though two groups used it
    assert "placeholders, not training data" in out.out
    assert "ATROPOS_ALLOW_DUMMY_MANAGED_SERVER" not in os.environ  # for the run only
    rewards = [r.outcome["reward"] for r in load_cassette(cassette).rollouts.values()
               if "reward" in r.outcome]
    assert len(rewards) == 4

    code = main(["replay", "managed_regex_env.py", "--cassette", str(cassette), "--",
                 *flags, "--env.data_path_to_save_groups", str(tmp_path / "rep.jsonl")])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert "0 misses" in out.out and out.out.count("DummyManagedServer") == 1
    assert (tmp_path / "rep.jsonl").read_bytes() == (tmp_path / "rec.jsonl").read_bytes()


def _dropping(mode: str, cassette: Path | None, url: str | None, extra: list[str],
              out: Path) -> int:
    live = ["--endpoint", url, "--model", "scripted"] if url else []
    where = ["--cassette", str(cassette)] if cassette is not None else []
    return main([mode, "dropping_env.py", *where, *live, "--", "process", *TOKENIZER,
                 "--env.data_path_to_save_groups", str(out), *extra])


@pytest.mark.parametrize("mode", ["record", "passthrough"])
def test_live_runs_stop_when_every_group_is_dropped(mode, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(MAX_EMPTY_VARIABLE, "4")
    cassette = tmp_path / "dropped.jsonl" if mode == "record" else None
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = _dropping(mode, cassette, endpoint.base_url, ["--env.total_steps", "3"],
                         tmp_path / "out.jsonl")
        asked = sum(1 for path, _ in endpoint.requests if path.endswith("/chat/completions"))
    err = capsys.readouterr().err
    assert code == 1, err[-3000:]
    assert asked == 4  # stopped at the bound, not after thousands of retries
    assert "TooStrictEnv.collect_trajectories returned no group 4 times in a row" in err
    assert "length filter" in err and "identical scores" in err and "next step" in err
    if cassette is not None:
        assert not cassette.exists()  # a run that never produced a group writes no cassette


def test_replay_stops_at_the_same_bound(tmp_path, capsys, monkeypatch):
    cassette = tmp_path / "roomy.jsonl"
    steps = ["--env.total_steps", "3"]
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = _dropping("record", cassette, endpoint.base_url,
                         [*steps, "--env.max_token_length", "4096"], tmp_path / "rec.jsonl")
    assert code == 0, capsys.readouterr().err[-3000:]
    capsys.readouterr()
    monkeypatch.setenv(MAX_EMPTY_VARIABLE, "3")
    # the recorded replies, today's tighter filter: every group is dropped
    code = _dropping("replay", cassette, None, [*steps, "--env.max_token_length", "8"],
                     tmp_path / "rep.jsonl")
    err = capsys.readouterr().err
    assert code == 1
    assert "returned no group 3 times in a row" in err, err[-3000:]


def test_serve_stops_when_every_group_is_dropped(tmp_path, capsys, monkeypatch):
    """atroposlib's ``handle_env`` logs and swallows what ``collect_trajectories`` raises, and
    ``env_manager`` loops until the trainer has its steps: without the harness's bound a serve
    run of this env never ends. Against the real run-api with a registered trainer."""
    monkeypatch.setenv(MAX_EMPTY_VARIABLE, "3")
    cassette = tmp_path / "served.jsonl"
    with trajectory_api(tmp_path) as api, ScriptedEndpoint(script=plain_script(),
                                                           seed=0) as endpoint:
        code = main(["record", "dropping_env.py", "--cassette", str(cassette),
                     "--endpoint", endpoint.base_url, "--model", "scripted", "--", "serve",
                     *TOKENIZER, "--env.rollout_server_url", api, "--env.wandb_name", "strict",
                     "--env.max_num_workers", "1", "--env.total_steps", "2"])
        asked = sum(1 for path, _ in endpoint.requests if path.endswith("/chat/completions"))
    err = capsys.readouterr().err
    assert code == 1, err[-3000:]
    assert asked == 3  # one worker: the bound trips at the third empty group, nothing after
    assert "TooStrictEnv.collect_trajectories returned no group 3 times in a row" in err
    assert "next step" in err
    assert not cassette.exists()
