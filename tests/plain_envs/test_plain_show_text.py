"""``show`` of a completion-route rollout prints its prompt and its completion as text, not the
raw JSON of the request and reply; a rollout of a multi-turn group shows only its own turns
(issue 45, item 5).

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
from hermes_replay.scripted_endpoint import Reply, Rule, Script, ScriptedEndpoint

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


def _turn_reply(conv, rng):
    import re

    a, b = map(int, re.search(r"(\d+) \+ (\d+)", conv.last_user_text).groups())
    turn = sum(1 for m in conv.messages if m.get("role") == "user")
    first = next((m["content"].split(":")[0] for m in conv.messages
                  if m.get("role") == "assistant"), "")
    answer = a + b if (conv.sample + turn) % 2 else a + b + 3
    # each reply its own words: the second names the first it follows
    return Reply(content=f"Turn {turn}, sample {conv.sample}{' after ' + first if first else ''}"
                         f": I add {a} and {b} with care; the total is \\boxed{{{answer}}}.")


def test_a_multi_turn_groups_rollout_shows_only_its_own_turns(tmp_path, capsys):
    cassette = tmp_path / "multiturn.jsonl"
    here = Path.cwd()
    os.chdir(HERE)
    try:
        script = Script("turns", [Rule("sum", lambda c: "+" in c.last_user_text, _turn_reply)])
        with ScriptedEndpoint(script=script, seed=0) as endpoint:
            assert main(["record", "multiturn_group_env.py", "--cassette", str(cassette),
                         "--endpoint", endpoint.base_url, "--model", "scripted", "--",
                         "process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
                         "--env.data_path_to_save_groups", str(tmp_path / "g.jsonl")]) == 0
    finally:
        os.chdir(here)
        import wandb

        if wandb.run is not None:
            wandb.finish()
    loaded = load_cassette(cassette)
    groups = {rid: rec for rid, rec in loaded.rollouts.items() if rec.outcome.get("kind")}
    rollouts = {rid: rec for rid, rec in loaded.rollouts.items() if rec.outcome.get("traffic")}
    assert len(groups) == 2 and len(rollouts) == 6
    capsys.readouterr()
    for rid, rec in rollouts.items():
        group = groups[rec.outcome["traffic"]]
        replies = {i.seq: i.response["body"]["choices"][0]["message"]["content"]
                   for i in group.interactions}
        assert len(replies) == 6  # three conversations, two turns each
        # its own turns: the second request holds the first reply it continues
        own = [replies[seq] for seq, _k in rec.outcome["samples"]]
        assert len(own) == 2 and rec.outcome["attribution"] == "text"
        second = next(i for i in group.interactions if i.seq == rec.outcome["samples"][1][0])
        assert second.request["body"]["messages"][1]["content"] == own[0]
        # its reward is its own last reply's, by the env's rule
        a, b = (int(x) for x in group.outcome["item"].strip("[]").split(","))
        assert rec.outcome["reward"] == (1.0 if f"\\boxed{{{a + b}}}" in own[1] else 0.0)
        assert main(["show", str(cassette), "--rollout", rid, "--full"]) == 0
        out = capsys.readouterr().out
        assert all(text in out for text in own)
        assert not any(text in out for seq, text in replies.items() if text not in own), rid


def test_a_generate_rollout_shows_prompt_and_its_own_completion_as_decoded_text(tmp_path,
                                                                                  capsys):
    """Phase 2 (``managed_server`` over a vLLM-type server): ``show`` decodes the prompt's
    token ids and each rollout's own sample's output ids (read from the logprob entries, what
    atroposlib trains on) with the cassette's tokenizer — decoded here again with the
    ``tokenizers`` library straight from the bundled tokenizer file."""
    from tokenizers import Tokenizer

    cassette = tmp_path / "regex.jsonl"
    here = Path.cwd()
    os.chdir(HERE)
    try:
        # each sample its own words, so a rollout showing its neighbour's would be seen
        script = Script("samples", [Rule("any", lambda c: True, lambda c, rng: Reply(
            content=f"Sample {c.sample} says <answer>abc{c.sample}</answer>"))])
        with ScriptedEndpoint(script=script, seed=0) as endpoint:
            assert main(["record", "managed_regex_env.py", "--cassette", str(cassette),
                         "--endpoint", endpoint.root_url, "--model", "scripted",
                         "--server-type", "vllm", "--", "process", "--env.tokenizer_name",
                         str(bundled_tokenizer_path()), "--env.total_steps", "1",
                         "--env.group_size", "2", "--env.data_path_to_save_groups",
                         str(tmp_path / "g.jsonl")]) == 0
    finally:
        os.chdir(here)
        import wandb

        if wandb.run is not None:
            wandb.finish()
    tok = Tokenizer.from_file(str(Path(bundled_tokenizer_path()) / "tokenizer.json"))
    loaded = load_cassette(cassette)
    rollouts = {rid: rec for rid, rec in loaded.rollouts.items() if rec.outcome.get("traffic")}
    assert len(rollouts) == 2
    capsys.readouterr()
    seen = set()
    for rid, rec in rollouts.items():
        (inter,) = loaded.rollouts[rec.outcome["traffic"]].interactions
        assert inter.request["path"] == "/generate"
        [[_seq, k]] = rec.outcome["samples"]
        prompt = tok.decode(inter.request["body"]["prompt"]["prompt_token_ids"],
                            skip_special_tokens=False)
        per_sample = [tok.decode([int(next(iter(e[0]))) for e in entries],
                                 skip_special_tokens=False)
                      for entries in inter.response["body"]["logprobs"]]
        own = per_sample[k]
        assert main(["show", str(cassette), "--rollout", rid, "--full"]) == 0
        out = capsys.readouterr().out
        lines = [line[2:] for line in out.splitlines()]
        assert "── prompt · generate · turn 1" in out, out
        assert prompt.splitlines()[1] in lines  # the user's words, as a line of text
        assert own.splitlines()[0] in lines
        assert f"{len(inter.response['body']['logprobs'][k])} tokens · finish" in out
        assert "prompt_token_ids" not in out and "⟨" not in out  # no JSON, no folded ids
        seen.add(own)
    assert len(seen) == 2  # each rollout its own sample's completion
