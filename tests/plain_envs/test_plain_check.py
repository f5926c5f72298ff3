"""``hermes-replay check`` on a plain atroposlib env (issue 35, item 5).

The Hermes layer's rules (``eval-agent-loop``: evaluate must run ``HermesAgentLoop``…) do not
apply to a plain env, and its rewards are judged by what any trainer needs — finite numbers,
groups that are not all alike — not by [0, 1]: GRPO-style −0.5 … 1.1 is healthy. ``check ENV``
finds ``cassettes/<env>/`` by itself, as ``watch`` does, and exits 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path
from hermes_replay._check import check_static
from hermes_replay._check._outputs import check_plain_rewards
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent


def test_plain_rewards_are_judged_by_what_a_trainer_needs():
    groups = [{"scores": [1.1, -0.5, 1.1, -0.5]}, {"scores": [0.0, 0.0]}]
    rewards = [("r", s) for g in groups for s in g["scores"]]
    assert check_plain_rewards(rewards, groups) == [
        ("warn", "1 of 2 group(s) scored all the same (group 1): atroposlib's identical-score "
                 "filter drops them in serve")]
    (severity, message), = check_plain_rewards([("r", float("nan"))], [])
    assert severity == "fail" and "not finite" in message
    (severity, message), = check_plain_rewards(rewards[-2:], groups[1:])
    assert severity == "fail" and "every group's scores are all the same" in message


def test_hermes_rules_are_left_out_for_a_plain_env_only():
    plain = {row.rule for row in check_static(HERE / "frozen_messages_env.py")}
    assert "eval-agent-loop" not in plain and "result-fields" not in plain
    assert {"server-list", "volatile-prompt", "wandb-super"} <= plain
    hermes = {row.rule for row in check_static(
        HERE.parent / "environments" / "former_style" / "dataset_env.py")}
    assert "eval-agent-loop" in hermes


@pytest.mark.slow
def test_check_passes_a_healthy_plain_env_with_rewards_outside_0_1(tmp_path, monkeypatch,
                                                                    capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    shutil.copy(HERE / "frozen_messages_env.py", project)
    monkeypatch.chdir(project)
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", "frozen_messages_env.py", "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--", "process", "--env.tokenizer_name",
                     str(bundled_tokenizer_path()), "--env.total_steps", "2",
                     "--env.group_size", "4", "--env.data_path_to_save_groups",
                     str(tmp_path / "groups.jsonl")])
    assert code == 0
    scores = [s for line in (tmp_path / "groups.jsonl").read_text().splitlines()
              for s in json.loads(line)["scores"]]
    assert set(scores) == {-0.5, 1.1}  # the case itself: every reward outside [0, 1]
    capsys.readouterr()
    code = main(["check", "frozen_messages_env.py", "--json"])  # no --cassette: found
    out = capsys.readouterr()
    records = json.loads(out.out)
    assert code == 0, [(r["rule"], r["message"][-1500:]) for r in records
                       if r["status"] == "fail"]
    assert "cassettes/frozen_messages_env" in out.err
    by_rule = {r["rule"]: r for r in records}
    assert by_rule["rewards"]["status"] == "pass" and by_rule["process"]["status"] == "pass"
    assert "eval-agent-loop" not in by_rule
