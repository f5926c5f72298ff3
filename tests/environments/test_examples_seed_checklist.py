"""The seed's minimal-checklist environment runs on our base class, buffers stay clean."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest
from _seed_checklist_env import MyEnv
from atroposlib.envs.base import BaseEnv

from environments._config import normalize_server_configs
from hermes_replay.scripted_endpoint import ScriptedEndpoint


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


async def test_seed_checklist_env_trains_evaluates_and_logs(endpoint, tmp_path, monkeypatch):
    config, servers = MyEnv.config_init()
    assert isinstance(servers, list)
    servers[0].base_url = endpoint.base_url
    config.use_wandb = False
    config.data_dir_to_save_evals = str(tmp_path)
    env = MyEnv(config, normalize_server_configs(servers))
    await env.setup()
    assert len(env._items) == 10 and len(env._eval_items) == 20

    group, _ = await env.collect_trajectories(await env.get_next_item())
    assert len(group["tokens"]) == 4 and all(0.0 <= s <= 1.0 for s in group["scores"])
    train_rewards = list(env._reward_buffer)
    assert len(train_rewards) == 4

    await env.evaluate()  # the seed's evaluate calls compute_reward, which appends
    assert env._reward_buffer == train_rewards  # ... and the base class rolled it back
    metrics = json.loads((tmp_path / "metrics.json").read_text())["results"]["all"]
    assert 0.0 <= metrics["eval/mean_reward"] <= 1.0

    seen = []

    async def fake_base(self, metrics=None):
        seen.append(dict(metrics))

    monkeypatch.setattr(BaseEnv, "wandb_log", fake_base)
    await env.wandb_log()
    assert seen[0]["train/mean_reward"] == pytest.approx(sum(train_rewards) / 4)
    assert "train/tool_errors_per_rollout" in seen[0]


def test_seed_checklist_env_file_runs_its_cli(endpoint, tmp_path, monkeypatch, capsys):
    path = Path(__file__).with_name("_seed_checklist_env.py")
    out = tmp_path / "groups.jsonl"
    monkeypatch.setenv("MY_ENV_BASE_URL", endpoint.base_url)
    monkeypatch.setattr(sys, "argv", [str(path), "process", "--env.total_steps", "1",
                                      "--env.group_size", "2",
                                      "--env.data_path_to_save_groups", str(out)])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(path), run_name="__main__")
    import wandb

    if wandb.run is not None:
        wandb.finish()
    assert exit_info.value.code in (0, None), capsys.readouterr().err[-3000:]
    group = json.loads(out.read_text().splitlines()[0])
    assert len(group["tokens"]) == 2 and len(group["messages"]) == 2
