"""Which inference endpoint a recording talks to — always the user's decision.

Recording sends real requests, so hermes-replay never picks a provider (DESIGN section 4, the
seed's rule "always ask the user"). The endpoint comes from, in order:

1. ``--endpoint URL --model NAME [--server-type T] [--api-key-env VAR]`` on ``record``;
2. ``--openai.base_url`` (or a ``--config`` YAML with ``openai.base_url``) among the env flags,
   or ``HERMES_BASE_URL`` in the environment (read by the shipped environments' config);
3. a question on the terminal with the seed's four options;
4. with no terminal: exit 2 with a message that lists the four options and their flags.

The API key is only ever read from an environment variable and handed to the env CLI
in-process (``--openai.api_key=…`` in ``sys.argv``), so it never lands in shell history, the
cassette header or the printed command.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from hermes_replay._runner.endpoint import (
    _ENV_VAR_NAME,
    SERVER_TYPES,
    Endpoint,
    ProviderError,
    endpoint_from_args,
)
from hermes_replay._runner.plan import flag_value

__all__ = [
    "ATROPOS_DEFAULT_URL",
    "OPENROUTER_URL",
    "SERVER_TYPES",
    "Endpoint",
    "ProviderError",
    "add_endpoint_args",
    "ask_endpoint",
    "endpoint_from_args",
    "flag_value",
    "no_endpoint_message",
    "options_text",
]

OPENROUTER_URL = "https://openrouter.ai/api/v1"
ATROPOS_DEFAULT_URL = "http://localhost:8000/v1"
OPENROUTER_MODEL_EXAMPLES = (
    "anthropic/claude-sonnet-4.5",
    "google/gemini-2.5-pro",
    "meta-llama/llama-3.3-70b-instruct",
)


def options_text() -> str:
    """The seed's four options with the flags that pick each one non-interactively."""
    return (
        "  1. OpenRouter (needs OPENROUTER_API_KEY in the environment)\n"
        f"       --endpoint {OPENROUTER_URL} --model MODEL "
        "--api-key-env OPENROUTER_API_KEY\n"
        f"       MODEL e.g. {', '.join(OPENROUTER_MODEL_EXAMPLES)}\n"
        "  2. Your own vLLM endpoint\n"
        "       --endpoint http://HOST:8000/v1 --model MODEL --server-type vllm\n"
        "  3. Another OpenAI-compatible API (server type openai, health check off)\n"
        "       --endpoint URL --model MODEL [--api-key-env VAR_HOLDING_THE_KEY]\n"
        "  4. Local Atropos training server (serve mode)\n"
        f"       -- serve --openai.base_url {ATROPOS_DEFAULT_URL}\n"
    )


def no_endpoint_message(prog: str, env_file: str, env_args: Sequence[str]) -> str:
    """Why a non-interactive ``record`` stops, and the four ways to go on."""
    shown = " ".join(env_args) if env_args else "process …"
    return (
        f"{prog}: no inference endpoint given for {env_file}, and stdin is not a terminal to ask.\n"
        "Recording sends real requests, and hermes-replay never picks a provider for you.\n"
        "Choose one of these and add its flags (before `--` unless shown after it):\n"
        f"{options_text()}"
        "(or put --openai.base_url in the env flags, or set HERMES_BASE_URL.)\n"
        f"Example: hermes-replay record {env_file} --endpoint http://localhost:8000/v1 "
        f"--model MODEL --server-type vllm -- {shown}\n"
    )


class _Asker:
    """Line-based question/answer over two text streams (a terminal, or fakes in tests)."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin, self.stdout = stdin, stdout

    def ask(self, prompt: str, *, default: str | None = None, required: bool = True) -> str:
        for _attempt in range(3):
            self.stdout.write(prompt)
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:
                raise ProviderError("no answer (end of input) — nothing was recorded.")
            answer = line.strip()
            if answer:
                return answer
            if default is not None:
                return default
            if not required:
                return ""
            self.stdout.write("  an answer is needed here.\n")
        raise ProviderError("no usable answer after 3 tries — nothing was recorded.")

    def ask_url(self, prompt: str, *, default: str | None = None) -> str:
        for _attempt in range(3):
            url = self.ask(prompt, default=default)
            if re.match(r"^https?://", url):
                return url.rstrip("/")
            self.stdout.write(f"  {url!r} is not an http(s) URL, e.g. {ATROPOS_DEFAULT_URL}\n")
        raise ProviderError("no valid base URL after 3 tries — nothing was recorded.")

    def ask_key_var(self, environ: Mapping[str, str]) -> str | None:
        for _attempt in range(3):
            name = self.ask(
                "Environment variable that holds the API key (empty if none): ", required=False
            )
            if not name:
                return None
            if not _ENV_VAR_NAME.match(name):
                self.stdout.write(
                    "  give the variable's NAME (e.g. MY_API_KEY), not the key itself.\n"
                )
                continue
            if not environ.get(name):
                self.stdout.write(f"  {name} is not set in this shell; export it first.\n")
                continue
            return name
        raise ProviderError("no usable API-key variable after 3 tries — nothing was recorded.")


def ask_endpoint(
    stdin: TextIO,
    stdout: TextIO,
    *,
    env_mode: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """Ask which endpoint to record against (the seed's four options). Pure over its streams."""
    environ = os.environ if environ is None else environ
    q = _Asker(stdin, stdout)
    stdout.write(
        "No inference endpoint given. Recording sends real requests; where should they go?\n"
        "  1. OpenRouter — a hosted model (needs OPENROUTER_API_KEY)\n"
        "  2. Your own vLLM endpoint — base URL and model name\n"
        "  3. Another OpenAI-compatible API — base URL, model name, optional API key\n"
        f"  4. Local Atropos training server (serve mode) — default {ATROPOS_DEFAULT_URL}\n"
    )
    choice = ""
    for _attempt in range(3):
        choice = q.ask("Choice [1-4]: ")
        if choice in {"1", "2", "3", "4"}:
            break
        stdout.write("  answer 1, 2, 3 or 4.\n")
    else:
        raise ProviderError("no valid choice after 3 tries — nothing was recorded.")

    if choice == "1":
        if not environ.get("OPENROUTER_API_KEY"):
            raise ProviderError(
                "OpenRouter needs OPENROUTER_API_KEY in the environment, and it is not set. "
                "Next step: export OPENROUTER_API_KEY=… and run the command again."
            )
        model = q.ask(f"OpenRouter model (e.g. {', '.join(OPENROUTER_MODEL_EXAMPLES)}): ")
        return Endpoint("openrouter", OPENROUTER_URL, model, "openai", False, "OPENROUTER_API_KEY")
    if choice == "2":
        url = q.ask_url(f"vLLM base URL (e.g. {ATROPOS_DEFAULT_URL}): ")
        model = q.ask("Model name served there: ")
        return Endpoint("vllm", url, model, "vllm", None, None)
    if choice == "3":
        url = q.ask_url("Base URL of the OpenAI-compatible API (e.g. https://api.example.com/v1): ")
        model = q.ask("Model name: ")
        key_var = q.ask_key_var(environ)
        return Endpoint("openai-compatible", url, model, "openai", False, key_var)
    if env_mode not in (None, "serve"):
        stdout.write(f"  note: option 4 is meant for `serve`; this run is `{env_mode}`.\n")
    url = q.ask_url(
        f"Atropos server base URL [{ATROPOS_DEFAULT_URL}]: ", default=ATROPOS_DEFAULT_URL
    )
    model = q.ask("Model name [the environment's default]: ", required=False) or None
    return Endpoint("atropos", url, model, None, None, None)


def add_endpoint_args(p: Any) -> None:
    """The endpoint flags of every command that sends live requests (``record``, ``fork``)."""
    from hermes_replay._runner.dead_endpoint import DEFAULT_FIRST_ANSWER_TIMEOUT

    g = p.add_argument_group("endpoint (never assumed)")
    g.add_argument("--endpoint", metavar="URL", help="base URL, e.g. http://localhost:8000/v1")
    g.add_argument(
        "--first-answer-timeout", type=float, default=DEFAULT_FIRST_ANSWER_TIMEOUT,
        metavar="SECONDS",
        help="stop the recording when the endpoint has answered nothing this long after the "
        f"first request (default {DEFAULT_FIRST_ANSWER_TIMEOUT:.0f}; 0: no limit). Refused "
        "connections stop it at once either way")
    g.add_argument("--model", metavar="NAME", help="model name the endpoint serves")
    g.add_argument(
        "--server-type",
        choices=SERVER_TYPES,
        help="atroposlib server type (default openai; openai also turns the health check off)",
    )
    g.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="NAME of the environment variable holding the API key (the key is never a flag)",
    )
