"""Three environment files written for the former Hermes layer run unmodified: ``process`` and
``evaluate`` recorded against the scripted endpoint, then replayed with the endpoint, the search
API and its key gone. Only ``--env.terminal_backend local`` is added where the file's default
backend (modal) is not provided here.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _search_api import SearchApi

from hermes_replay import run_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent / "former_style"
KEY = "tvly-dev-FORMERstyleKEY0123456789"
#: the only flags added to the unmodified files (besides where to write output)
OVERRIDES = {
    "hermes_coding_env": ["--env.terminal_backend", "local"],
    "web_research_env": [],
    "dataset_env": [],
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A working copy of the fixtures (so the cassettes and outputs stay in tmp_path)."""
    shutil.copytree(HERE, tmp_path / "envs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_API_KEY", "sk-test-FORMERstyle0123456789")
    for var in ("HERMES_BASE_URL", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _record(env: str, mode: str, capsys) -> Path:
    out_flag = ("--env.data_path_to_save_groups" if mode == "process"
                else "--env.data_dir_to_save_evals")
    out = f"data/{env}/{'groups.jsonl' if mode == 'process' else 'evals'}"
    cassette = Path("cassettes") / env / f"{mode}.jsonl"
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["record", f"envs/{env}.py", "--cassette", str(cassette),
                     "--endpoint", ep.base_url, "--model", "scripted", "--server-type", "openai",
                     "--", mode, *OVERRIDES[env], out_flag, out])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-4000:]
    return cassette


def _replay(cassette: Path, capsys) -> str:
    code = main(["replay", str(cassette), "--out", "replayed", "--fail-on-change", "--strict"])
    captured = capsys.readouterr()
    assert code == 0, captured.out[-3000:] + captured.err[-4000:]
    assert "0 misses" in captured.out and "reward changed" not in captured.out
    return captured.out


@pytest.mark.parametrize("env", sorted(OVERRIDES))
def test_process_records_and_replays_unmodified(env, project, monkeypatch, capsys):
    with SearchApi(KEY) as api:
        monkeypatch.setenv("TAVILY_API_KEY", KEY)
        monkeypatch.setenv("TAVILY_BASE_URL", api.url)
        cassette = _record(env, "process", capsys)
    groups = [json.loads(line) for line in
              (project / "data" / env / "groups.jsonl").read_text().splitlines()]
    assert len(groups) == 2
    scores = [s for g in groups for s in g["scores"]]
    assert all(0.0 <= s <= 1.0 for s in scores) and any(s > 0 for s in scores), scores
    for group in groups:
        for tokens, masks in zip(group["tokens"], group["masks"], strict=True):
            assert len(tokens) == len(masks) and any(m != -100 for m in masks)
    text = cassette.read_text()
    assert KEY not in text and "FORMERstyle" not in text
    if env == "web_research_env":
        assert api.bodies, "the web env never searched"
        assert '"kind":"tool_http"' in text.replace(" ", "")  # the search API calls are recorded

    monkeypatch.delenv("TAVILY_API_KEY")  # replay: no key, no API, no endpoint
    out = _replay(cassette, capsys)
    assert "4 rollouts replayed" in out  # 2 groups of 2
    (replayed,) = (project / "replayed").rglob("groups.jsonl")
    assert [json.loads(line)["scores"] for line in replayed.read_text().splitlines()] == [
        g["scores"] for g in groups]


@pytest.mark.parametrize("env", sorted(OVERRIDES))
def test_evaluate_records_and_replays_unmodified(env, project, monkeypatch, capsys):
    with SearchApi(KEY) as api:
        monkeypatch.setenv("TAVILY_API_KEY", KEY)
        monkeypatch.setenv("TAVILY_BASE_URL", api.url)
        cassette = _record(env, "evaluate", capsys)
    metrics = json.loads((project / "data" / env / "evals" / "metrics.json").read_text())
    assert metrics["results"], metrics
    monkeypatch.delenv("TAVILY_API_KEY")
    _replay(cassette, capsys)
    (path,) = (project / "replayed").rglob("metrics.json")
    replayed = json.loads(path.read_text())
    assert replayed["results"] == metrics["results"]


def test_the_modal_default_stops_at_startup_instead_of_scoring_zero(project, capsys):
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["record", "envs/hermes_coding_env.py", "--endpoint", ep.base_url,
                     "--model", "scripted", "--", "process"])
        assert ep.requests == []  # nothing ran
    err = capsys.readouterr().err
    assert code != 0
    assert "terminal_backend 'modal'" in err and "--env.terminal_backend local" in err
    assert not Path("cassettes/hermes_coding_env/process.jsonl").exists()


def test_a_hub_tokenizer_offline_stops_and_a_stored_copy_replays(project, capsys, monkeypatch):
    import hermes_replay

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["record", "envs/dataset_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", "--", "process", "--env.tokenizer_name",
                     "NousResearch/Hermes-3-Llama-3.1-8B"])
    err = capsys.readouterr().err
    assert code != 0 and "--env.tokenizer_name" in err and ".tokenizers/" in err

    # the way out: a local copy of the tokenizer; recording stores it with the cassette …
    local = project / "my-tokenizer"
    shutil.copytree(hermes_replay.bundled_tokenizer_path(), local)
    (local / "tokenizer_config.json").write_text(
        (local / "tokenizer_config.json").read_text().replace("}", ', "model_max_length": 4096}',
                                                               1))
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["record", "envs/dataset_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", "--", "process", "--env.tokenizer_name", str(local),
                     "--env.data_path_to_save_groups", "data/groups.jsonl"])
    assert code == 0, capsys.readouterr().err[-3000:]
    capsys.readouterr()
    cassette = Path("cassettes/dataset_env/process.jsonl")
    header = json.loads(cassette.read_text().splitlines()[0])
    assert header["tokenizer"]["store"].startswith("../.tokenizers/")
    # … and a replay on a machine without that folder uses the stored copy
    shutil.rmtree(local)
    _replay(cassette, capsys)
    assert os.path.isdir(Path("cassettes") / ".tokenizers")


def test_web_tools_executed_on_replay_get_their_http_answers_from_the_cassette(
        project, monkeypatch, capsys):
    """``tools="execute"``: web_search really runs again, and its Tavily calls are answered from
    the recorded HTTP traffic — still no key and no API."""
    with SearchApi(KEY) as api:
        monkeypatch.setenv("TAVILY_API_KEY", KEY)
        monkeypatch.setenv("TAVILY_BASE_URL", api.url)
        cassette = _record("web_research_env", "process", capsys)
        searched = len(api.bodies)
    assert searched
    monkeypatch.delenv("TAVILY_API_KEY")
    result = run_cassette(cassette, out_dir=project / "executed", tools="execute", strict=True)
    assert result.rollouts and not result.changed_rewards()
    recorded = [json.loads(line) for line in cassette.read_text().splitlines()]
    http = [r for r in recorded if r.get("type") == "interaction" and r["kind"] == "tool_http"]
    assert len(http) == searched  # recorded; had one not been answered, the stopped API would
    # have turned web_search into an error: drift, which strict replay raises
