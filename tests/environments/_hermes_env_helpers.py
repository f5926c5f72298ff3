"""Shared helpers for the base-env, example-env and CLI tests (not a test module)."""

from __future__ import annotations

from typing import Any

import hermes_replay
from environments._config import default_server_configs


def make_env(cls: type, base_url: str, *, server_type: str = "openai", **overrides: Any) -> Any:
    """An env of ``cls`` against ``base_url``; config from ``config_init`` plus overrides."""
    config, _ = cls.config_init()
    fields = {"use_wandb": False, "group_size": 4, "max_agent_turns": 6, **overrides}
    config = type(config)(**{**config.model_dump(), **fields})
    servers = default_server_configs(base_url=base_url, model_name="scripted",
                                     server_type=server_type, api_key="sk-test-key")
    return cls(config, servers)


class Recorder:
    """Keeps what environments report to the active cassette: a passthrough session (nothing
    is written or blocked) observed for the block."""

    def __init__(self) -> None:
        self.scopes: list[Any] = []
        self.annotations: list[dict[str, Any]] = []
        self._session = hermes_replay.cassette("(not written)", mode="passthrough")

    def rollout_finished(self, scope: Any) -> None:
        self.scopes.append(scope)

    def annotate(self, fields: dict[str, Any]) -> None:
        self.annotations.append(fields)

    def __enter__(self) -> Recorder:
        self._session.__enter__()
        self._session.observe(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.__exit__(None, None, None)


def unmasked_text(tokenizer: Any, tokens: list[int], masks: list[int]) -> str:
    return tokenizer.decode([t for t, m in zip(tokens, masks, strict=True) if m != -100])
