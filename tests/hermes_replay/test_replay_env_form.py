"""``hermes-replay replay ENV_FILE --cassette C -- MODE …`` gives what ``replay C`` gives: an
output folder of its own (atroposlib's default outputs land there, not in the project), a
``result.json`` for ``diff`` and ``report``, and the reward changes against the recording
(issue 47 item 7: this form printed none and wrote ``data/…`` into the project)."""

from __future__ import annotations

import json
from pathlib import Path

from _calc_project import CASSETTE_REL, ENV_REL

from hermes_replay.cli import main


def test_the_env_form_writes_its_outputs_into_its_own_folder_and_shows_reward_changes(
        calc_project: Path, capsys, tmp_path):
    env = calc_project / ENV_REL
    # the author halves the reward; the oracle: every recorded reward, halved
    env.write_text(env.read_text().replace("        return reward\n",
                                           "        return reward / 2\n"))
    recorded = {json.loads(line)["rollout"]: json.loads(line)["reward"]
                for line in (calc_project / CASSETTE_REL).read_text().splitlines()
                if json.loads(line).get("type") == "outcome"}
    assert recorded and all(r > 0 for r in recorded.values())
    out = tmp_path / "out"
    # no output flag: atroposlib would write data/<env>.jsonl into the working folder
    code = main(["replay", ENV_REL, "--cassette", CASSETTE_REL, "--out", str(out), "--",
                 "process", "--env.total_steps", "2", "--env.group_size", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert not (calc_project / "data").exists()
    assert (out / "groups.jsonl").is_file()
    result = json.loads((out / "result.json").read_text())
    rewards = {r["id"]: r["reward"] for r in result["rollouts"]}
    assert rewards == {rid: r / 2 for rid, r in recorded.items()}
    for rid, reward in recorded.items():  # each changed rollout named, with both rewards
        (line,) = [x for x in printed.splitlines() if f"reward changed {rid} " in x]
        assert line.endswith(f": {reward:.3f} -> {reward / 2:.3f}"), line
    assert f"outputs: {out}" in printed
    # diff reads the folder: the same changes, and transcripts equal (no miss)
    assert main(["diff", CASSETTE_REL, str(out)]) == 1
    diffed = capsys.readouterr().out
    assert f"rollouts: {len(recorded)} of {len(recorded)} changed" in diffed
    assert "every request of B" in diffed
