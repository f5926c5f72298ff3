"""Shared helpers for the base-env, example-env and CLI tests (not a test module)."""

from __future__ import annotations

from typing import Any

from environments._config import default_server_configs
from hermes_replay import _hooks


def make_env(cls: type, base_url: str, *, server_type: str = "openai", **overrides: Any) -> Any:
    """An env of ``cls`` against ``base_url``; config from ``config_init`` plus overrides."""
    config, _ = cls.config_init()
    fields = {"use_wandb": False, "group_size": 4, "max_agent_turns": 6, **overrides}
    config = type(config)(**{**config.model_dump(), **fields})
    servers = default_server_configs(base_url=base_url, model_name="scripted",
                                     server_type=server_type, api_key="sk-test-key")
    return cls(config, servers)


class Recorder:
    """A hermes_replay hooks listener that keeps what environments report."""

    def __init__(self) -> None:
        self.scopes: list[Any] = []
        self.annotations: list[dict[str, Any]] = []

    def rollout_finished(self, scope: Any) -> None:
        self.scopes.append(scope)

    def annotate(self, fields: dict[str, Any]) -> None:
        self.annotations.append(fields)

    def __enter__(self) -> Recorder:
        _hooks.add_listener(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _hooks.remove_listener(self)


def unmasked_text(tokenizer: Any, tokens: list[int], masks: list[int]) -> str:
    return tokenizer.decode([t for t, m in zip(tokens, masks, strict=True) if m != -100])
