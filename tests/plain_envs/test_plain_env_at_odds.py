"""Envs at odds with atroposlib 0.4.0 are told so in words, at once (issue 35, item 8).

- a ``collect_trajectories`` that returns unscored tuples (written for an older atroposlib) is
  named with what it returned and what 0.4.0 expects, not with atroposlib's
  ``'tuple' object has no attribute 'get'``;
- ``--server-type vllm`` against a server that speaks the OpenAI API only (no ``/generate``, no
  ``/health``: atroposlib's client then waits for a healthy server forever) fails in seconds,
  naming ``--server-type openai``, instead of running until killed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path
from hermes_replay._runner.plain_shapes import describe, shape_problem
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent
TOKENIZER = ["--env.tokenizer_name", str(bundled_tokenizer_path())]


@pytest.fixture(autouse=True)
def _here(monkeypatch):
    monkeypatch.chdir(HERE)
    yield
    import wandb

    if wandb.run is not None:
        wandb.finish()


def test_shapes_atroposlib_takes_and_those_it_does_not():
    group = {"tokens": [[1]], "masks": [[1]], "scores": [0.5]}
    for good in [(group, []), (None, []), ([group, None], []), ([], [])]:
        assert shape_problem(good, custom_postprocess=False) is None, good
    assert "not a pair" in shape_problem(group, False)
    assert "ScoredDataItem" in shape_problem(({"tokens": [1], "scores": 0.5}, []), False)
    assert "a group is a tuple" in shape_problem(([("m", "stop")], []), False)
    assert shape_problem(([("m", "stop")], []), custom_postprocess=True) is None
    assert describe(([("m", "stop")] * 4, [])) == "(a list of 4 tuple, a list of 0 nothing)"


def test_unscored_tuples_are_named_with_what_atroposlib_expects(tmp_path, capsys):
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", "older_api_env.py", "--cassette", str(tmp_path / "c.jsonl"),
                     "--endpoint", endpoint.base_url, "--model", "scripted", "--", "process",
                     *TOKENIZER, "--env.data_path_to_save_groups", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == 1
    assert "OlderApiEnv.collect_trajectories returned (a list of 2 tuple, a list of 0" in err
    assert "atroposlib 0.4.0 expects a pair (groups, backlog)" in err
    assert "next step" in err and "ScoredDataGroup(" in err
    assert "'tuple' object has no attribute 'get'" not in err.replace(
        "error ('tuple' object has no attribute 'get')", "")


@pytest.mark.parametrize("server_type", ["vllm", "sglang"])
def test_vllm_type_against_an_openai_only_server_fails_in_seconds(server_type, tmp_path,
                                                                   capsys):
    started = time.monotonic()
    with ScriptedEndpoint(script=plain_script(), seed=0, openai_only=True) as endpoint:
        code = main(["record", "managed_regex_env.py", "--cassette", str(tmp_path / "c.jsonl"),
                     "--endpoint", endpoint.root_url, "--model", "scripted", "--server-type",
                     server_type, "--", "process", *TOKENIZER, "--env.total_steps", "1",
                     "--env.data_path_to_save_groups", str(tmp_path / "o.jsonl")])
        generated = [p for p, _ in endpoint.requests if p.endswith("/generate")]
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1, err[-3000:]
    assert took < 30, took
    assert "/generate answered HTTP 404" in err and "--server-type openai" in err
    assert generated == ["/generate"]  # the one GET that asked; no prompt was ever sent
    assert not (tmp_path / "c.jsonl").exists()
