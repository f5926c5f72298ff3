"""The stand-in model serves an env it knows nothing about (issue 35, item 7).

The generic script's plain answers differ in shape within a group — the short echo, a
``\\boxed{}`` answer after ``<think>``, ``#### N``, ``<answer>`` tags, JSON, a long reply —
seeded, so a recording is reproducible; an env that drops groups scored all alike is then not
dropped whole.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hermes_replay import bundled_tokenizer_path, load_cassette
from hermes_replay._runner.plain_groups import MAX_EMPTY_VARIABLE
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent
QUESTION = "Tom has 17 apples and buys 25 more. How many apples does he have now?"


def _contents(seed: int, n: int) -> list[str]:
    with ScriptedEndpoint(script="generic", seed=seed) as endpoint:
        reply = httpx.post(endpoint.base_url + "/chat/completions", timeout=30, json={
            "model": "m", "n": n, "messages": [{"role": "user", "content": QUESTION}]}).json()
    return [c["message"]["content"] for c in reply["choices"]]


def test_a_groups_plain_answers_differ_in_shape_and_are_seeded():
    first = _contents(seed=0, n=6)
    assert f"You asked: {QUESTION}" in first[0]
    assert "<think>" in first[1] and "\\boxed{" in first[1]
    assert "#### " in first[2] and "<answer>" in first[3] and first[4].startswith("{")
    assert len(set(first)) == 6
    assert _contents(seed=0, n=6) == first  # reproducible
    single = _contents(seed=0, n=1)
    assert single == first[:1]  # a single request gets the short echo it always got


@pytest.mark.slow
def test_an_env_the_script_does_not_know_is_not_dropped_whole(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(HERE)
    monkeypatch.setenv(MAX_EMPTY_VARIABLE, "4")  # the old stand-in: stopped after 4, not 20
    cassette = tmp_path / "think.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        code = main(["record", "think_format_env.py", "--cassette", str(cassette),
                     "--endpoint", endpoint.base_url, "--model", "scripted", "--", "process",
                     "--env.tokenizer_name", str(bundled_tokenizer_path()),
                     "--env.total_steps", "2", "--env.group_size", "4",
                     "--env.data_path_to_save_groups", str(tmp_path / "groups.jsonl")])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    rewards = [r.outcome["reward"] for r in load_cassette(cassette).rollouts.values()
               if "reward" in r.outcome]
    assert len(rewards) == 8 and len(set(rewards)) > 1
    import wandb

    if wandb.run is not None:
        wandb.finish()
