"""``show`` of a completion-route rollout prints its prompt and its completion as text, not the
raw JSON of the request and reply (issue 45, item 5).

``completion_env`` asks ``/v1/completions`` for a group of four; each rollout shows the group's
prompt and its own sample's completion — read here from the cassette by the sample its record
names — under ``prompt`` and ``completion`` headings.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, load_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def test_a_completion_rollout_shows_prompt_and_completion_as_text(tmp_path, capsys):
    cassette = tmp_path / "completion.jsonl"
    here = Path.cwd()
    os.chdir(HERE)
    try:
        with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
            assert main(["record", "completion_env.py", "--cassette", str(cassette),
                         "--endpoint", endpoint.base_url, "--model", "scripted", "--",
                         "process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
                         "--env.total_steps", "1", "--env.group_size", "4",
                         "--env.data_path_to_save_groups", str(tmp_path / "g.jsonl")]) == 0
    finally:
        os.chdir(here)
        import wandb

        if wandb.run is not None:
            wandb.finish()
    loaded = load_cassette(cassette)
    rollouts = {rid: rec for rid, rec in loaded.rollouts.items() if rec.outcome.get("traffic")}
    assert len(rollouts) == 4
    capsys.readouterr()
    for rid, rec in rollouts.items():
        (inter,) = loaded.rollouts[rec.outcome["traffic"]].interactions
        [[_seq, k]] = rec.outcome["samples"]
        prompt = inter.request["body"]["prompt"]
        own = [c["text"] for c in inter.response["body"]["choices"] if c["index"] == k]
        others = {c["text"] for c in inter.response["body"]["choices"]} - set(own)
        assert main(["show", str(cassette), "--rollout", rid, "--full"]) == 0
        out = capsys.readouterr().out
        lines = [line[2:] for line in out.splitlines()]  # the body's two-space indent
        assert "── prompt · completion · turn 1" in out, out
        assert "── completion · turn 1" in out
        assert prompt.splitlines()[0] in lines  # text, not a JSON string with \n escapes
        assert own[0].splitlines()[0] in lines
        assert not any(o.splitlines()[0] in lines for o in others if o != own[0])
        assert '"choices"' not in out and '"prompt"' not in out
