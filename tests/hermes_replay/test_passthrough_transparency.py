"""Pass-through is transparent: ``hermes-replay passthrough`` gives the JSONL of a plain run.

Both runs execute ``environments/multi_signal_env.py process`` in this process with the same
argv, each against a FRESH scripted endpoint with the same seed, sampling at temperature 1.

Why a fresh endpoint per run: the endpoint counts samples per identical request, so a second run
against the same endpoint would get the next samples, not the same ones.

Why two comparisons: with ``group_size > 1`` the rollouts of a group send identical first
requests at the same moment, and the endpoint hands its (fixed) set of samples out in arrival
order — which slot gets which sample is up to the event loop, harness or not. So:

* ``group_size 1`` (groups run one after another in ``process``): no two identical requests are
  ever in flight together, every request gets a fixed answer → the JSONL must be byte-identical;
* ``group_size 4``: the per-group *set* of rollouts (tokens, masks, score, messages) must be
  identical; only their order within the group may differ. Logprobs are compared as the group's
  multiset of values: the endpoint draws them per sample index, so when two rollouts of a group
  wrote the same text in turn 1 (with different logprobs) and then send the same turn-2 request,
  which of them gets which turn-2 sample is again arrival order — the values are the same, their
  pairing across turns is not fixed (with or without the harness).

Both for Phase 1 (openai chat API) and Phase 2 (vLLM ``/generate`` through ManagedServer).
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"


def _argv(endpoint: ScriptedEndpoint, server_type: str, group_size: int, out: Path) -> list[str]:
    url = endpoint.base_url if server_type == "openai" else endpoint.root_url
    return ["process", "--env.total_steps", "3", "--env.group_size", str(group_size),
            "--env.max_agent_turns", "6", "--env.data_path_to_save_groups", str(out),
            "--openai.base_url", url, "--openai.model_name", "scripted",
            "--openai.server_type", server_type, "--openai.health_check", "false"]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-passthrough")
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    yield tmp_path
    import wandb

    if wandb.run is not None:
        wandb.finish()


def _plain_run(argv: list[str], monkeypatch) -> None:
    """``python multi_signal_env.py ARGV`` in this process, no cassette anywhere."""
    from hermes_replay._session import intercept as _intercept

    assert _intercept.current() is None, "a cassette is active: not a plain run"
    monkeypatch.setattr(sys, "argv", [str(ENV_FILE), *argv])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(ENV_FILE), run_name="__main__")
    assert exit_info.value.code in (0, None)


def _passthrough_run(argv: list[str], capsys) -> None:
    code = main(["passthrough", str(ENV_FILE), "--", *argv])
    output = capsys.readouterr()
    assert code == 0, output.err[-4000:]
    assert "passthrough" in output.out


def _runs(server_type: str, group_size: int, workdir: Path, monkeypatch, capsys
          ) -> tuple[Path, Path, list[tuple[str, dict]]]:
    plain, passed = workdir / "plain.jsonl", workdir / "passthrough.jsonl"
    with ScriptedEndpoint(script="examples", seed=7) as endpoint:
        _plain_run(_argv(endpoint, server_type, group_size, plain), monkeypatch)
        plain_requests = list(endpoint.requests)
    with ScriptedEndpoint(script="examples", seed=7) as endpoint:
        _passthrough_run(_argv(endpoint, server_type, group_size, passed), capsys)
        passed_requests = list(endpoint.requests)
    # the harness added, dropped and changed no request (order aside)
    key = [json.dumps(r, sort_keys=True, default=str) for r in plain_requests]
    assert sorted(key) == sorted(json.dumps(r, sort_keys=True, default=str)
                                 for r in passed_requests)
    # passthrough writes no cassette, not even a partial one
    assert sorted(p.name for p in workdir.iterdir() if p.suffix in (".jsonl", ".partial")) == [
        "passthrough.jsonl", "plain.jsonl"]
    return plain, passed, plain_requests


@pytest.mark.parametrize("server_type", ["openai", "vllm"])
def test_passthrough_jsonl_is_byte_identical_to_a_plain_run(
        server_type, workdir, monkeypatch, capsys):
    plain, passed, requests = _runs(server_type, 1, workdir, monkeypatch, capsys)
    path = "/generate" if server_type == "vllm" else "/v1/chat/completions"
    assert any(p == path for p, _ in requests)
    assert plain.read_bytes() == passed.read_bytes()
    groups = [json.loads(line) for line in plain.read_text().splitlines()]
    assert len(groups) == 3 and all(len(g["tokens"]) == 1 for g in groups)


def _rollouts(group: dict) -> list[str]:
    keys = ("tokens", "masks", "scores", "messages")
    return sorted(json.dumps({k: group[k][i] for k in keys}, sort_keys=True)
                  for i in range(len(group["tokens"])))


def _logprob_values(group: dict) -> list[float]:
    return sorted(v for row in group.get("inference_logprobs") or [] for v in row)


@pytest.mark.parametrize("server_type", ["openai", "vllm"])
def test_passthrough_groups_hold_the_same_rollouts_as_a_plain_run(
        server_type, workdir, monkeypatch, capsys):
    plain, passed, _ = _runs(server_type, 4, workdir, monkeypatch, capsys)
    plain_groups = [json.loads(line) for line in plain.read_text().splitlines()]
    passed_groups = [json.loads(line) for line in passed.read_text().splitlines()]
    assert len(plain_groups) == len(passed_groups) == 3
    for a, b in zip(plain_groups, passed_groups, strict=True):
        assert len(a["tokens"]) == 4
        assert _rollouts(a) == _rollouts(b)
        assert _logprob_values(a) == _logprob_values(b)
        assert bool(_logprob_values(a)) == (server_type == "vllm")
    # sampling really varied: the comparison is not between four copies of one answer
    assert any(len(set(_rollouts(g))) > 1 for g in plain_groups)
