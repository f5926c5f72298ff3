"""dataset_name / dataset_split / prompt_field: Hugging Face datasets from local files offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _hermes_env_helpers import make_env

from environments._datasets import DatasetNotLoaded, load_dataset_rows
from environments.agent_loop import AgentResult
from environments.hermes_base_env import HermesAgentBaseEnv
from environments.tool_context import ToolContext

ROWS = [{"prompt": "What is 2+2?", "answer": "4"}, {"prompt": "What is 3+3?", "answer": "6"}]


@pytest.fixture(autouse=True)
def private_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_local_file_of_each_format_loads(tmp_path):
    assert load_dataset_rows(str(_jsonl(tmp_path / "d.jsonl", ROWS))) == ROWS
    (tmp_path / "d.csv").write_text("prompt,answer\nWhat is 2+2?,4\n")
    assert load_dataset_rows(str(tmp_path / "d.csv")) == [{"prompt": "What is 2+2?",
                                                          "answer": 4}]
    assert load_dataset_rows(str(_jsonl(tmp_path / "t.jsonl", ROWS)), "test") == ROWS
    with pytest.raises(DatasetNotLoaded, match=r"unknown format '.xml'"):
        (tmp_path / "d.xml").write_text("<x/>")
        load_dataset_rows(str(tmp_path / "d.xml"))


def test_a_local_folder_loads_by_split(tmp_path):
    _jsonl(tmp_path / "ds" / "train.jsonl", ROWS)
    _jsonl(tmp_path / "ds" / "test.jsonl", ROWS[:1])
    assert load_dataset_rows(str(tmp_path / "ds"), "train") == ROWS
    assert load_dataset_rows(str(tmp_path / "ds"), "test") == ROWS[:1]
    with pytest.raises(DatasetNotLoaded, match=r"split 'validation'.*--env.dataset_split"):
        load_dataset_rows(str(tmp_path / "ds"), "validation")


def test_a_hub_id_offline_fails_fast_naming_the_local_way(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetNotLoaded) as err:
        load_dataset_rows("someone/not-cached-here")
    assert "hub id" in str(err.value) and "local file or folder" in str(err.value)


class DatasetEnv(HermesAgentBaseEnv):
    """Only the reward and evaluate: setup, items and prompts come from the dataset fields."""

    name = "dataset-defaults"

    async def compute_reward(self, item, result: AgentResult, ctx: ToolContext) -> float:
        return 1.0

    async def evaluate(self, *args, **kwargs) -> None:
        return None


async def test_the_base_class_loads_cycles_and_formats_from_the_dataset_fields(tmp_path):
    rows = [{"question": "q1", "id": 1}, {"question": "q2", "id": 2}]
    data = _jsonl(tmp_path / "ds" / "validation.jsonl", rows)
    env = make_env(DatasetEnv, "http://127.0.0.1:9/v1", dataset_name=str(data.parent),
                   dataset_split="validation", prompt_field="question")
    await env.setup()
    items = [await env.get_next_item() for _ in range(3)]
    assert [i["id"] for i in items] == [1, 2, 1]
    assert env.format_prompt(items[0]) == "q1"
    env.config.prompt_field = "prompt"
    with pytest.raises(KeyError, match=r"no field 'prompt' \(its fields: question, id\)"):
        env.format_prompt(items[0])


async def test_without_a_dataset_the_default_setup_says_what_to_do():
    env = make_env(DatasetEnv, "http://127.0.0.1:9/v1")
    with pytest.raises(NotImplementedError, match=r"--env.dataset_name"):
        await env.setup()
