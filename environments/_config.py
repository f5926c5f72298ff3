"""Configuration for Hermes agent environments, and the server-config helpers around it.

Kept apart from the base class so an environment's config can be read (and its CLI flags listed)
without importing the agent machinery.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml
from atroposlib.envs.base import BaseEnvConfig
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from pydantic import Field, field_validator

import hermes_replay

logger = logging.getLogger(__name__)

#: Environment variables read for the API key, first non-empty wins. Never written anywhere.
API_KEY_VARS = ("HERMES_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY")
#: openai 3.x refuses an empty key at client construction; local servers ignore this one.
PLACEHOLDER_API_KEY = "EMPTY"
REDACTED = "<redacted>"

INFERENCE_OPTIONS = (
    "Set the inference endpoint explicitly (nothing is assumed):\n"
    "  1. OpenRouter: --openai.base_url https://openrouter.ai/api/v1 --openai.model_name <model>"
    " --openai.server_type openai --openai.health_check false (key in OPENROUTER_API_KEY)\n"
    "  2. Your own vLLM: --openai.base_url http://<host>:8000/v1 --openai.model_name <model>"
    " --openai.server_type vllm\n"
    "  3. Another OpenAI-compatible API: --openai.base_url <url> --openai.model_name <model>"
    " --openai.server_type openai --openai.health_check false (key in HERMES_API_KEY)\n"
    "  4. A local Atropos training server (serve mode): --openai.base_url"
    " http://localhost:8000/v1\n"
    "or put the same keys under `openai:` in a YAML file passed with --config."
)


class EndpointNotConfigured(ValueError):
    """No inference endpoint was given (the env never picks a provider on its own)."""


def _shipped_tokenizer() -> str:
    from hermes_replay import bundled_tokenizer_path

    return bundled_tokenizer_path()


def _split_list(value: Any) -> Any:
    """CLI flags arrive as strings: accept JSON (``["a","b"]``) or ``a,b``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        if text.lower() in ("", "none", "null"):
            return None
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class HermesAgentEnvConfig(BaseEnvConfig):
    """Config of every Hermes agent environment (CLI: ``--env.<field>``; YAML: ``env:``)."""

    # ``| str`` only so atroposlib's CLI model accepts the raw flag text; the validators below
    # turn it into the real type before anything reads it.
    enabled_toolsets: list[str] | str | None = Field(
        default=None,
        description="Toolsets offered to the model (e.g. 'terminal,file'); None = all toolsets.",
    )
    disabled_toolsets: list[str] | str | None = Field(
        default=None, description="Toolsets removed after enabled_toolsets is applied."
    )
    max_agent_turns: int = Field(
        default=30, ge=1, description="Maximum model calls per rollout (agent loop turns)."
    )
    system_prompt: str | None = Field(
        default=None, description="System message put before the task prompt; None = none."
    )
    agent_temperature: float = Field(
        default=1.0, ge=0.0, description="Sampling temperature of training rollouts (eval uses 0)."
    )
    terminal_backend: str = Field(
        default="local", description="Sandbox backend for tools and ToolContext (e.g. 'local')."
    )
    terminal_timeout: int = Field(
        default=120, ge=1, description="Default timeout in seconds of one terminal command."
    )
    tool_call_parser: str = Field(
        default="hermes",
        description="Parser for tool calls written as text (Phase 2 servers, raw completions).",
    )
    extra_body: dict[str, Any] | str | None = Field(
        default=None, description="Extra JSON body sent with every chat completion request."
    )
    eval_size: int = Field(
        default=20, ge=0, description="How many held-out items evaluate() runs (0 = none)."
    )
    split_seed: int = Field(
        default=0, description="Seed of the train/eval split, so the split is reproducible."
    )
    max_concurrent_eval_rollouts: int = Field(
        default=8, ge=1, description="How many eval rollouts run at once."
    )
    # -- fields of the former Hermes layer (UPSTREAM.md); each has an effect or a startup error
    distribution: str | None = Field(
        default=None,
        description="Named toolset distribution sampled once per group (see "
        "environments.tools.distributions); exclusive with enabled_toolsets.",
    )
    terminal_lifetime: int = Field(
        default=3600, ge=1,
        description="Seconds a sandbox may sit idle before it is reaped (rollout sandboxes are "
        "removed when their rollout ends; this bounds ones left behind).",
    )
    dataset_name: str | None = Field(
        default=None,
        description="Hugging Face dataset: a hub id, or a local file/folder (offline).",
    )
    dataset_split: str = Field(default="train", description="Split of dataset_name to load.")
    prompt_field: str = Field(
        default="prompt", description="Field of a dataset row holding the task prompt.")
    tool_pool_size: int = Field(
        default=128, ge=1, description="Threads that run tool calls (shared by all rollouts).")
    default_result_size_chars: int = Field(
        default=100_000, ge=0,
        description="A tool result longer than this is saved to a file in the sandbox and "
        "replaced by a preview.",
    )
    turn_budget_chars: int = Field(
        default=200_000, ge=0,
        description="When one turn's tool results exceed this, the largest are saved first.",
    )
    preview_size_chars: int = Field(
        default=1_500, ge=0, description="Characters of a saved result shown to the model.")
    tool_result_overrides: dict[str, int] | str | None = Field(
        default=None,
        description="Per-tool thresholds, e.g. '{\"terminal\": 20000}' (read_file is never "
        "saved).",
    )
    web_backend: str = Field(
        default="auto",
        description="Backend of the web/search toolsets: 'tavily' (TAVILY_API_KEY), "
        "'local_corpus' (web_corpus_dir), or 'auto' (tavily when its key is set).",
    )
    web_corpus_dir: str | None = Field(
        default=None, description="Folder of .md/.txt pages for web_backend=local_corpus.")
    tokenizer_name: str = Field(
        default_factory=_shipped_tokenizer,
        description="Tokenizer for training tokens (default: the project's shipped tokenizer, "
        "loaded offline). Use the policy model's tokenizer for real training.",
    )

    @field_validator("enabled_toolsets", "disabled_toolsets", mode="before")
    @classmethod
    def _parse_toolsets(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("extra_body", "tool_result_overrides", mode="before")
    @classmethod
    def _parse_extra_body(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            return None if text.lower() in ("", "none", "null") else json.loads(text)
        return value

    def build_budget_config(self) -> Any:
        """The immutable tool-result budget of this config (``environments.tool_budget``)."""
        from environments.tool_budget import budget_from_fields

        return budget_from_fields(self)


def api_key_from_env() -> str:
    """The first non-empty key among :data:`API_KEY_VARS`, else a placeholder."""
    for var in API_KEY_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return PLACEHOLDER_API_KEY


def default_server_configs(**overrides: Any) -> list[APIServerConfig]:
    """``[APIServerConfig]`` with no provider assumed — a LIST, so ServerManager keeps base_url.

    Endpoint and model come from flags/YAML (``--openai.base_url``/``--openai.model_name``) or,
    for convenience, ``HERMES_BASE_URL``/``HERMES_MODEL``/``HERMES_SERVER_TYPE``.
    """
    fields: dict[str, Any] = {
        "base_url": os.environ.get("HERMES_BASE_URL", ""),
        "model_name": os.environ.get("HERMES_MODEL", "default"),
        "server_type": os.environ.get("HERMES_SERVER_TYPE", "openai"),
        "api_key": api_key_from_env(),
        # OpenAIServer's health check sends a real chat request every second (DESIGN 5).
        "health_check": False,
    }
    fields.update(overrides)
    return [APIServerConfig(**fields)]


def normalize_server_configs(configs: Any, tokenizer_name: str | None = None) -> Any:
    """Fill empty API keys (placeholder or env var) and refuse a missing endpoint clearly.

    A vLLM/SGLang server config without a tokenizer gets the env's tokenizer: atroposlib would
    otherwise load one named after ``model_name`` from the hub (offline: a crash).
    """
    items = configs if isinstance(configs, list) else [configs]
    for cfg in items:
        if not isinstance(cfg, APIServerConfig):
            continue
        if tokenizer_name and cfg.server_type != "openai" and cfg.tokenizer_name in ("", "none"):
            cfg.tokenizer_name = tokenizer_name
        if not (cfg.api_key or "").strip():
            cfg.api_key = api_key_from_env()
        if not (cfg.base_url or "").strip():
            raise EndpointNotConfigured(
                f"no inference endpoint configured (openai.base_url is empty).\n"
                f"{INFERENCE_OPTIONS}")
    return configs


def _secret_values() -> set[str]:
    return {os.environ[v] for v in API_KEY_VARS if os.environ.get(v, "").strip()}


def _redact(node: Any, secrets: set[str]) -> Any:
    if isinstance(node, dict):
        return {
            k: (REDACTED if _is_secret_key(k) and v not in (None, "", PLACEHOLDER_API_KEY)
                else _redact(v, secrets))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_redact(v, secrets) for v in node]
    if isinstance(node, str):
        for secret in secrets:
            node = node.replace(secret, REDACTED)
    return node


def _is_secret_key(key: Any) -> bool:
    lowered = str(key).lower()
    return any(word in lowered for word in ("api_key", "apikey", "secret", "token_secret",
                                            "password", "authorization"))


def redact_yaml_file(path: str | os.PathLike[str]) -> bool:
    """Rewrite a YAML file with API keys replaced by ``<redacted>``; True if it changed."""
    file = Path(path)
    if not file.is_file():
        return False
    original = yaml.safe_load(file.read_text()) or {}
    # the key by name and value, then every rule hermes-replay records with (URL passwords
    # in base_url, credential-named fields, key shapes, known secrets)
    cleaned = hermes_replay.scrub(_redact(original, _secret_values()))
    if cleaned == original:
        return False
    file.write_text(yaml.dump(cleaned, default_flow_style=False, sort_keys=False))
    logger.info("redacted API keys in %s", file)
    return True


def ensure_wandb_offline_safe() -> None:
    """process/evaluate force ``use_wandb=True``; without credentials, make wandb a no-op.

    wandb would otherwise prompt for a login (or fail) on a machine with no key. Set
    ``WANDB_MODE``/``WANDB_API_KEY`` yourself to log for real.
    """
    if os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY"):
        return
    netrc = Path.home() / ".netrc"
    if netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="ignore"):
        return
    os.environ["WANDB_MODE"] = "disabled"
    logger.warning("no wandb credentials found: WANDB_MODE=disabled for this run "
                   "(set WANDB_API_KEY or WANDB_MODE=offline to keep logs)")
