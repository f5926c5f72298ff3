"""The three CLI modes of the example environments, end to end, offline.

Each test runs an environment file as a program (``python environments/<env>.py <mode> …``) in a
subprocess against the scripted endpoint on 127.0.0.1; ``serve`` also talks to atroposlib's
real trajectory API (``run-api``) started here, with a trainer-side client pulling batches.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from _trajectory_api import pull_batches, stop, trajectory_api

from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET123456789"
ENVS = {
    "terminal_test_env": "terminal-test",
    "research_judge_env": "research-judge",
    "multi_signal_env": "multi-signal",
}
SMALL = ["--env.total_steps", "2", "--env.group_size", "4", "--env.max_agent_turns", "6"]


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        yield ep


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "HERMES_BASE_URL")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false",
                "HERMES_API_KEY": SECRET, "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def _openai_flags(endpoint: ScriptedEndpoint) -> list[str]:
    return ["--openai.base_url", endpoint.base_url, "--openai.model_name", "scripted",
            "--openai.server_type", "openai", "--openai.health_check", "false"]


def _run_cli(module: str, mode: str, args: list[str], monkeypatch, capsys) -> str:
    """``python environments/<module>.py <mode> <args>``, in this process (imports are paid
    once; the ``serve`` test below runs an env file as a real program)."""
    path = ROOT / "environments" / f"{module}.py"
    monkeypatch.setattr(sys, "argv", [str(path), mode, *args])
    for key, value in _child_env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    try:
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_path(str(path), run_name="__main__")
    finally:
        import wandb

        if wandb.run is not None:  # process mode's (disabled) run: leave no global state
            wandb.finish()
    output = capsys.readouterr()
    assert exit_info.value.code in (0, None), (
        f"{path.name} {mode} exited {exit_info.value.code}:\n{output.out[-3000:]}"
        f"\n{output.err[-5000:]}")
    return output.out


@pytest.mark.parametrize("module", sorted(ENVS))
def test_process_writes_jsonl_with_tokens_masks_scores_messages_and_html(
        module, endpoint, tmp_path, monkeypatch, capsys):
    out = tmp_path / f"{module}.jsonl"
    # process forces use_wandb=True; with no wandb setup at all it must still work offline
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    _run_cli(module, "process", [*SMALL, "--env.data_path_to_save_groups", str(out),
                                 *_openai_flags(endpoint)], monkeypatch, capsys)
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(groups) == 2
    scores = []
    for group in groups:
        assert len(group["tokens"]) == len(group["masks"]) == len(group["scores"]) == 4
        assert len(group["messages"]) == 4
        for tokens, masks in zip(group["tokens"], group["masks"], strict=True):
            assert len(tokens) == len(masks)
            assert masks[0] == -100 and any(m != -100 for m in masks)
            assert all(m in (-100, t) for t, m in zip(tokens, masks, strict=True))
        for messages in group["messages"]:
            assert messages[0]["role"] in ("system", "user")
            assert any(m["role"] == "assistant" for m in messages)
        scores += group["scores"]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert len(set(scores)) > 1, f"rewards never vary: {scores}"
    html = out.with_suffix(".html")
    assert html.is_file() and "<html" in html.read_text().lower()


@pytest.mark.parametrize("module", sorted(ENVS))
def test_evaluate_writes_metrics_and_samples_and_no_api_key(
        module, endpoint, tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    printed = _run_cli(module, "evaluate", ["--env.eval_size", "2", "--env.max_agent_turns",
                                            "6", "--env.data_dir_to_save_evals", str(out),
                                            *_openai_flags(endpoint)], monkeypatch, capsys)
    assert "<redacted>" in printed and SECRET not in printed  # the printed config, too
    metrics = json.loads((out / "metrics.json").read_text())
    task = f"atropos|{ENVS[module]}_eval|0"
    assert task in metrics["results"]
    values = metrics["results"]["all"]
    assert values and all(0.0 <= v <= 1.0 for k, v in values.items() if "reward" in k)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and all(0.0 <= s["reward"] <= 1.0 for s in samples)
    config = yaml.safe_load((out / "evaluate_config.yaml").read_text())
    assert config["openai"][0]["api_key"] == "<redacted>"
    for file in out.rglob("*"):
        if file.is_file():
            assert SECRET not in file.read_text(errors="ignore"), f"API key leaked into {file}"


def test_serve_sends_rollouts_to_the_real_trajectory_api(endpoint, tmp_path):
    # the trainer side, as a trainer does it: register, then poll /batch
    with trajectory_api(tmp_path) as api_url:
        env_proc = subprocess.Popen(
            [sys.executable, str(ROOT / "environments" / "multi_signal_env.py"), "serve",
             *SMALL, "--env.rollout_server_url", api_url, "--env.wandb_name", "multi-signal",
             *_openai_flags(endpoint)],
            env=_child_env(WANDB_MODE="disabled"), cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            batches = pull_batches(api_url, env_proc, 2, within=90)
            scores = []
            for batch in batches:
                assert sum(len(group["tokens"]) for group in batch) == 8
                for group in batch:
                    assert group["env_id"] == 0
                    assert len(group["messages"]) == len(group["tokens"]) == 4
                    assert all(len(t) == len(m) for t, m in zip(group["tokens"],
                                                                group["masks"], strict=True))
                    scores += group["scores"]
            assert all(0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 1
            envs = httpx.get(api_url + "/status").json()
            assert envs["current_step"] >= 2
        finally:
            stop(env_proc)


def test_no_endpoint_fails_with_the_four_options(tmp_path, monkeypatch, capsys):
    path = ROOT / "environments" / "multi_signal_env.py"
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    monkeypatch.setattr(sys, "argv", [str(path), "process", "--env.total_steps", "1",
                                      "--env.data_path_to_save_groups",
                                      str(tmp_path / "x.jsonl")])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(path), run_name="__main__")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "no inference endpoint configured" in err
    for option in ("OpenRouter", "vLLM", "OpenAI-compatible", "Atropos"):
        assert option in err
    assert not (tmp_path / "x.jsonl").exists()
