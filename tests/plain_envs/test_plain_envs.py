"""Plain atroposlib environments, files untouched: record → replay → snapshot → diff → probe.

Each environment of this folder is written the way Atropos community environments are (a
``BaseEnv`` subclass, ``config_init`` returning ``[APIServerConfig(api_key="")]``, a hub
tokenizer name, ``score()`` filling a ``ScoredDataGroup``) and is run through the real CLI with
only machine flags added: a local ``--env.tokenizer_name`` and, for the token-level ones,
``--server-type vllm``. The project is copied to a temporary folder and recorded from its
``envs/`` subfolder, then replayed from another folder of the project, so the header's path must
be the one relative to the project root.
"""

from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, load_cassette, run_cassette
from hermes_replay._report._sources import run_from_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint
from hermes_replay.snapshot import RolloutSnapshotExtension, render_run

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    env_file: str  # relative to the project's envs/ folder
    server_type: str
    edit_file: str  # where the reward change is made
    edit: tuple[str, str]  # (old, new): every reward of 1.0 becomes something else
    module: str | None = None
    reward_range: str = "0,1"
    keyless: bool = True  # config_init's APIServerConfig has api_key=""


CASES = {
    "chat-n-greater-than-1": Case("arith_chat_env.py", "openai", "arith_chat_env.py",
                                  ("return 1.0 if", "return 0.5 if")),
    "completion": Case("completion_env.py", "openai", "completion_env.py",
                       ("return 1.0 if", "return 0.5 if"), reward_range="-1,1"),
    "managed-server-generate": Case("managed_regex_env.py", "vllm", "managed_regex_env.py",
                                    ("return 1.0 if", "return 0.5 if"), keyless=False),
    "package-relative-imports": Case("mathpkg/env.py", "vllm", "mathpkg/grading.py",
                                     ("return 1.0 if", "return 0.5 if"), module="mathpkg.env"),
    "multi-step-game": Case("grid_game_env.py", "openai", "grid_game_env.py",
                            ("reward = 1.0 if", "reward = 0.5 if"), reward_range="-1,1"),
}


def _flags(out: str) -> list[str]:
    return ["process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
            "--env.total_steps", "2", "--env.group_size", "4",
            "--env.data_path_to_save_groups", out]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project: pyproject.toml at its root, the env files under envs/."""
    root = tmp_path / "proj"
    (root / "envs").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'users-envs'\nversion = '0'\n")
    for path in HERE.iterdir():
        if path.name.startswith(("test_", "__")):
            continue
        if path.is_dir():
            shutil.copytree(path, root / "envs" / path.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif path.suffix == ".py" and not path.name.startswith("_"):
            shutil.copy(path, root / "envs" / path.name)
    monkeypatch.chdir(root / "envs")
    yield root
    import wandb

    if wandb.run is not None:  # process mode's (disabled) run: leave no global state
        wandb.finish()


def _port_closed(url: str) -> bool:
    host, port = url.rsplit("//", 1)[1].split("/")[0].split(":")
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) != 0


def _record(case: Case, cassette: Path, capsys) -> None:
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        url = endpoint.root_url if case.server_type != "openai" else endpoint.base_url
        code = main(["record", case.env_file, "--cassette", str(cassette), "--endpoint", url,
                     "--model", "scripted", "--server-type", case.server_type,
                     "--seed", "7",  # the env's own draws (the game's episode seeds) too
                     "--",
                     *_flags("out/groups.jsonl")])
        output = capsys.readouterr()
        assert code == 0, output.err[-4000:] + output.out[-2000:]
    assert _port_closed(url), "the endpoint must be gone for the replay"
    # the handled case, named once (two groups, one server config: one line)
    assert output.out.count("a placeholder key is sent") == (1 if case.keyless else 0)


@pytest.mark.parametrize("name", list(CASES))
def test_plain_env_records_replays_snapshots_diffs_and_probes(name, project, tmp_path, capsys,
                                                              monkeypatch, snapshot):
    case = CASES[name]
    cassette = project / "envs" / "cassettes" / f"{name}.jsonl"
    _record(case, cassette, capsys)

    # the cassette: the env file relative to the project root, per-rollout rewards, groups
    recorded = load_cassette(cassette)
    assert recorded.header.env_file == f"envs/{case.env_file}"
    assert recorded.header.extra.get("env_cwd") == "envs"
    assert recorded.header.extra.get("env_module") == case.module
    text = cassette.read_text()
    assert "EMPTY" not in text  # the placeholder key is never written
    groups = {rid: r.outcome for rid, r in recorded.rollouts.items()
              if r.outcome.get("kind") == "group"}
    assert len(groups) == 2
    rewards = {rid: r.outcome["reward"] for rid, r in recorded.rollouts.items()
               if "reward" in r.outcome}
    assert len(rewards) == 8 and len(set(rewards.values())) > 1, rewards
    for group in groups.values():  # the group's score list is its rollouts' rewards, in order
        assert [rewards[rid] for rid in group["rollouts"]] == group["scores"]
    for rid in rewards:  # turns: the model requests of its own traffic, or of its group's
        outcome = recorded.rollouts[rid].outcome
        traffic = recorded.rollouts[outcome.get("traffic") or rid].interactions
        assert outcome["turns_used"] == len(traffic) >= 1, (rid, outcome)
    report = run_from_cassette(recorded)  # the HTML report's view: the same rollouts, each
    assert set(report.rollouts) == set(rewards)  # with a transcript (its group's, if shared)
    assert all(report.records[rid].interactions for rid in rewards)
    recorded_groups = (project / "envs" / "out" / "groups.jsonl").read_bytes()
    assert len(recorded_groups.splitlines()) == 2

    # replay from another folder of the project, through the header alone
    monkeypatch.chdir(project / "other")
    first = run_cassette(cassette, out_dir=tmp_path / "replay1")
    assert first.summary.misses == [] and first.error is None
    assert first.rewards == rewards
    assert (tmp_path / "replay1" / "groups.jsonl").read_bytes() == recorded_groups
    assert first == snapshot(extension_class=RolloutSnapshotExtension)

    # a reward change: the replay shows it per rollout, diff names exactly those rollouts
    edited = project / "envs" / case.edit_file
    source = edited.read_text()
    assert case.edit[0] in source
    edited.write_text(source.replace(case.edit[0], case.edit[1]))
    second = run_cassette(cassette, out_dir=tmp_path / "replay2")
    assert second.summary.misses == [] and second.error is None
    winners = {rid for rid, reward in rewards.items() if reward > 0.5}
    assert winners and set(second.changed_rewards()) == winners
    before, after = render_run(first).splitlines(), render_run(second).splitlines()
    moved = {line.split()[0] for line in set(after) - set(before) if line.strip()}
    # the snapshot diff: one line per rollout whose reward moved (and the metrics it moves)
    assert moved & set(rewards) == winners
    capsys.readouterr()
    assert main(["diff", str(cassette), str(tmp_path / "replay2"), "--json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert {c["rollout"] for c in diff["rewards"]} == winners
    assert diff["only_in_a"] == [] and diff["only_in_b"] == []

    # probes run through the same identity: one rollout per item, each with its reward
    monkeypatch.chdir(project / "envs")
    edited.write_text(source)
    probes = tmp_path / "probes"
    code = main(["probe", case.env_file, "--items", "1", "--probe", "refusal", "--probe",
                 "restate", "--json", "--cassettes", str(probes), "--server-type",
                 case.server_type, f"--reward-range={case.reward_range}", "--",
                 "--env.tokenizer_name", str(bundled_tokenizer_path())])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert [p["probe"] for p in report["probes"]] == ["refusal", "restate"]
    for probe in report["probes"]:
        assert probe["rollouts"] == 1 and probe["verdict"] == "ok", probe
        probed = load_cassette(probe["cassette"])
        assert [r.outcome["reward"] for r in probed.rollouts.values()
                if "reward" in r.outcome] == [probe["mean"]]


def test_a_split_n_replays_each_choice_to_its_rollout(project, tmp_path, capsys, monkeypatch):
    """``group_size`` 16 is above atroposlib's ``max_n_completions`` (8): ``ServerManager``
    sends two identical ``n=8`` requests at once inside ONE group scope and joins their choices
    in the order it created them. Which of the two got which answers at recording is arrival
    order; the replay must hand each request the answers recorded for it, every time, so the
    16 rollouts keep their rewards and ``groups.jsonl`` comes back byte for byte."""
    cassette = project / "envs" / "cassettes" / "split.jsonl"
    flags = ["process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
             "--env.total_steps", "1", "--env.group_size", "16"]
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", "arith_chat_env.py", "--cassette", str(cassette), "--endpoint",
                     endpoint.base_url, "--model", "scripted", "--seed", "7", "--", *flags,
                     "--env.data_path_to_save_groups", "out/groups.jsonl"])
        asked = [body for path, body in endpoint.requests if path.endswith("/chat/completions")]
    assert code == 0, capsys.readouterr().err[-3000:]
    assert [body.get("n") for body in asked] == [8, 8]  # atroposlib split it: the case itself
    recorded = load_cassette(cassette)
    rewards = {rid: r.outcome["reward"] for rid, r in recorded.rollouts.items()
               if "reward" in r.outcome}
    assert len(rewards) == 16 and len(set(rewards.values())) > 1, rewards
    # one group, two requests answered differently: a swap on replay would move rewards
    (group,) = [r for r in recorded.rollouts.values() if r.outcome.get("kind") == "group"]
    first, second = group.interactions
    assert first.request == second.request and first.response != second.response
    recorded_groups = (project / "envs" / "out" / "groups.jsonl").read_bytes()
    monkeypatch.chdir(project / "other")
    for attempt in range(3):
        out = tmp_path / f"replay{attempt}"
        result = run_cassette(cassette, out_dir=out)
        assert result.summary.misses == [] and result.error is None
        assert result.rewards == rewards
        assert (out / "groups.jsonl").read_bytes() == recorded_groups
