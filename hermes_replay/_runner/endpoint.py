"""The inference endpoint a live run talks to, as one value (``Endpoint``), and the endpoint
the command line already names (``endpoint_from_args``).

Recording and forking send real requests, so hermes-replay never picks a provider (DESIGN
section 4). Asking on a terminal is the CLI's part (``_cli._provider``); this is the part the
Python API needs too (``fork_rollout`` builds its env flags from an ``Endpoint``). The API key
is only ever read from an environment variable (``secret_flags``), never a flag or a header.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_replay._runner.plan import flag_value

__all__ = ["SERVER_TYPES", "Endpoint", "ProviderError", "endpoint_from_args"]

SERVER_TYPES = ("openai", "vllm", "sglang")
_ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProviderError(Exception):
    """The endpoint cannot be settled; the message says what to pass instead. Exit code 2."""


@dataclass(frozen=True)
class Endpoint:
    """Where recorded requests go. ``None`` fields keep the environment's own default."""

    source: str  # "flags" | "env-args" | "openrouter" | "vllm" | "openai-compatible" | "atropos"
    base_url: str | None = None
    model: str | None = None
    server_type: str | None = None
    health_check: bool | None = None
    api_key_env: str | None = None

    def env_flags(self) -> list[str]:
        """The ``--openai.*`` flags to append to the env CLI (safe to print and record)."""
        if self.source == "env-args":
            return []  # the user's env flags already say everything
        flags: list[str] = []
        if self.base_url:
            flags += ["--openai.base_url", self.base_url]
        if self.model:
            flags += ["--openai.model_name", self.model]
        if self.server_type:
            flags += ["--openai.server_type", self.server_type]
        if self.health_check is not None:
            flags += ["--openai.health_check", "true" if self.health_check else "false"]
        return flags

    def secret_flags(self, environ: Mapping[str, str]) -> list[str]:
        """``--openai.api_key=…`` for the in-process argv only; never printed or recorded."""
        if not self.api_key_env:
            return []
        value = environ.get(self.api_key_env, "")
        if not value:
            raise ProviderError(
                f"environment variable {self.api_key_env} is not set (it should hold the API key "
                f"for {self.base_url or 'the endpoint'}). Next step: export {self.api_key_env}=… "
                "and run the command again."
            )
        return [f"--openai.api_key={value}"]

    def record_flags(self) -> list[str]:
        """Flags that reproduce this choice on the ``hermes-replay record`` command line."""
        if self.source == "env-args":
            return []
        parts: list[str] = []
        if self.base_url:
            parts += ["--endpoint", self.base_url]
        if self.model:
            parts += ["--model", self.model]
        if self.server_type:
            parts += ["--server-type", self.server_type]
        if self.api_key_env:
            parts += ["--api-key-env", self.api_key_env]
        return parts

    def header_fields(self) -> dict[str, str]:
        """Fields for the cassette header (no key, only the variable's name)."""
        fields = {
            "endpoint_type": self.server_type or "default",
            "base_url": self.base_url or "",
            "model": self.model or "",
        }
        return {k: v for k, v in fields.items() if v}


def _yaml_base_url(config_path: str) -> str | None:
    """``openai.base_url`` from an env ``--config`` YAML file, if it sets one."""
    try:
        import yaml

        data = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, ImportError):
        return None
    section = data.get("openai") if isinstance(data, dict) else None
    if isinstance(section, list) and section:
        section = section[0]
    if isinstance(section, dict) and section.get("base_url"):
        return str(section["base_url"])
    return None


def endpoint_from_args(
    *,
    endpoint: str | None,
    model: str | None,
    server_type: str | None,
    api_key_env: str | None,
    env_args: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> Endpoint | None:
    """The endpoint the command line (or HERMES_BASE_URL) already names, or None when the user
    must be asked."""
    environ = os.environ if environ is None else environ
    in_env = flag_value(env_args, "--openai.base_url")
    config = flag_value(env_args, "--config")
    if endpoint is None and (model or server_type or api_key_env):
        raise ProviderError(
            "--model/--server-type/--api-key-env need --endpoint URL as well. Next step: add "
            "--endpoint (e.g. --endpoint http://localhost:8000/v1)."
        )
    if endpoint is not None:
        if in_env is not None:
            raise ProviderError(
                f"the endpoint is given twice: --endpoint {endpoint} and --openai.base_url "
                f"{in_env} after `--`. Next step: keep one of them."
            )
        if not re.match(r"^https?://", endpoint):
            raise ProviderError(
                f"--endpoint {endpoint!r} is not an http(s) URL. Next step: pass the base URL of "
                "the OpenAI-compatible API, e.g. --endpoint http://localhost:8000/v1."
            )
        if not model:
            raise ProviderError(
                f"--endpoint {endpoint} needs --model NAME (the model name the endpoint serves)."
            )
        if api_key_env is not None and not _ENV_VAR_NAME.match(api_key_env):
            raise ProviderError(
                f"--api-key-env takes the NAME of an environment variable, got {api_key_env!r}. "
                "Next step: export the key as e.g. MY_API_KEY and pass --api-key-env MY_API_KEY."
            )
        kind = server_type or "openai"
        return Endpoint(
            source="flags",
            base_url=endpoint.rstrip("/"),
            model=model,
            server_type=kind,
            # an external OpenAI-style API has no /health; vLLM/SGLang keep their default
            health_check=False if kind == "openai" else None,
            api_key_env=api_key_env,
        )
    base_url = in_env if in_env is not None else (_yaml_base_url(config) if config else None)
    if not base_url and environ.get("HERMES_BASE_URL"):
        return Endpoint(
            source="env-args",
            base_url=environ["HERMES_BASE_URL"],
            model=flag_value(env_args, "--openai.model_name") or environ.get("HERMES_MODEL"),
            server_type=flag_value(env_args, "--openai.server_type")
            or environ.get("HERMES_SERVER_TYPE"),
        )
    if base_url:
        return Endpoint(
            source="env-args",
            base_url=base_url,
            model=flag_value(env_args, "--openai.model_name"),
            server_type=flag_value(env_args, "--openai.server_type"),
        )
    return None
