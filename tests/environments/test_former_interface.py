"""Every name, field, default and signature of the former Hermes layer (UPSTREAM.md) exists."""

from __future__ import annotations

import importlib
import inspect

import pytest

from environments.agent_loop import AgentResult, HermesAgentLoop, ToolError, resize_tool_pool
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig
from environments.tool_budget import BudgetConfig
from environments.tool_call_parsers import (
    PARSER_REGISTRY,
    ToolCallParser,
    get_parser,
    list_parsers,
    register_parser,
)
from environments.tool_context import ToolContext

PARSER_MODULES = {
    "hermes": "HermesToolCallParser", "qwen": "QwenToolCallParser",
    "qwen3_coder": "Qwen3CoderToolCallParser", "mistral": "MistralToolCallParser",
    "llama": "LlamaToolCallParser", "deepseek_v3": "DeepSeekV3ToolCallParser",
    "deepseek_v3_1": "DeepSeekV31ToolCallParser", "kimi_k2": "KimiK2ToolCallParser",
    "glm45": "Glm45ToolCallParser", "glm47": "Glm47ToolCallParser",
    "longcat": "LongcatToolCallParser",
}


@pytest.mark.parametrize(("module", "cls"), sorted(PARSER_MODULES.items()))
def test_parser_modules_import_by_their_former_file_names(module: str, cls: str) -> None:
    mod = importlib.import_module(f"environments.tool_call_parsers.{module}_parser")
    parser_cls = getattr(mod, cls)
    assert issubclass(parser_cls, ToolCallParser)
    assert PARSER_REGISTRY[parser_cls.name] is parser_cls


def test_parser_registry_names_and_class_hierarchy() -> None:
    from environments.tool_call_parsers import (
        DeepSeekV31ToolCallParser,
        Glm45ToolCallParser,
        Glm47ToolCallParser,
        HermesToolCallParser,
        LlamaToolCallParser,
        QwenToolCallParser,
    )

    assert issubclass(QwenToolCallParser, HermesToolCallParser)
    assert issubclass(Glm47ToolCallParser, Glm45ToolCallParser)
    assert PARSER_REGISTRY["llama3_json"] is PARSER_REGISTRY["llama4_json"] is LlamaToolCallParser
    assert PARSER_REGISTRY["deepseek_v31"] is PARSER_REGISTRY["deepseek_v3_1"] is (
        DeepSeekV31ToolCallParser)
    assert PARSER_REGISTRY["qwen"] is QwenToolCallParser
    assert isinstance(get_parser("qwen"), QwenToolCallParser)  # get_parser returns an instance
    assert sorted(PARSER_REGISTRY) == list_parsers()
    with pytest.raises(TypeError):  # read-only: registering goes through register_parser
        PARSER_REGISTRY["x"] = QwenToolCallParser  # type: ignore[index]
    assert callable(register_parser)


def test_config_fields_and_defaults_are_the_former_ones() -> None:
    fields = HermesAgentEnvConfig.model_fields
    expected = {
        "enabled_toolsets": None, "disabled_toolsets": None, "distribution": None,
        "max_agent_turns": 30, "system_prompt": None, "agent_temperature": 1.0,
        "terminal_backend": "local", "terminal_timeout": 120, "terminal_lifetime": 3600,
        "dataset_name": None, "dataset_split": "train", "prompt_field": "prompt",
        "tool_pool_size": 128, "tool_call_parser": "hermes",
        "default_result_size_chars": 100_000, "turn_budget_chars": 200_000,
        "preview_size_chars": 1_500, "tool_result_overrides": None, "extra_body": None,
    }
    for name, default in expected.items():
        assert fields[name].default == default, name
        assert fields[name].description, name


def test_build_budget_config_is_immutable_and_resolves_thresholds() -> None:
    config = HermesAgentEnvConfig(default_result_size_chars=10, turn_budget_chars=30,
                                  preview_size_chars=4,
                                  tool_result_overrides='{"terminal": 5}')
    budget = config.build_budget_config()
    assert isinstance(budget, BudgetConfig)
    assert (budget.default_result_size, budget.turn_budget, budget.preview_size) == (10, 30, 4)
    assert dict(budget.tool_overrides) == {"terminal": 5}
    assert budget.resolve_threshold("terminal") == 5
    assert budget.resolve_threshold("web_search") == 10
    assert budget.resolve_threshold("read_file") == float("inf")  # never persisted
    with pytest.raises(AttributeError):
        budget.turn_budget = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        budget.tool_overrides["x"] = 1  # type: ignore[index]


def test_loop_signature_accepts_every_former_argument() -> None:
    params = inspect.signature(HermesAgentLoop).parameters
    former = ["server", "tool_schemas", "valid_tool_names", "max_turns", "task_id",
              "temperature", "max_tokens", "extra_body", "budget_config"]
    assert list(params)[: len(former)] == former  # same order: positional calls keep working
    defaults = {"max_turns": 30, "task_id": None, "temperature": 1.0, "max_tokens": None,
                "extra_body": None, "budget_config": None}
    for name, default in defaults.items():
        assert params[name].default == default, name
    assert callable(resize_tool_pool)


def test_result_dataclasses_have_the_former_defaults() -> None:
    result = AgentResult(messages=[])
    assert (result.managed_state, result.turns_used, result.finished_naturally) == (None, 0, False)
    assert result.reasoning_per_turn == [] and result.tool_errors == []
    error = ToolError(1, "terminal", "{}", "exit code 1", "{}")
    assert (error.turn, error.tool_name) == (1, "terminal")


def test_tool_context_has_every_former_method() -> None:
    for name in ("terminal", "read_file", "write_file", "search", "upload_file", "upload_dir",
                 "download_file", "download_dir", "web_search", "web_extract",
                 "browser_navigate", "browser_snapshot", "call_tool", "cleanup"):
        assert callable(getattr(ToolContext, name)), name
    assert inspect.signature(ToolContext.terminal).parameters["timeout"].default == 180
    params = inspect.signature(ToolContext.call_tool).parameters
    assert list(params)[1:3] == ["tool_name", "arguments"]


def test_base_class_names_a_default_for_dataset_driven_envs() -> None:
    # setup/get_next_item/format_prompt have dataset-driven defaults; the rest stays abstract
    assert HermesAgentBaseEnv.__abstractmethods__ == frozenset({"compute_reward", "evaluate"})
