"""Before a vLLM/SGLang client records: does the endpoint serve ``/generate`` at all?

atroposlib's ``VLLMServer``/``SGLangServer`` send the token-level calls to ``<root>/generate``
and hold every request until ``GET <root>/health`` answers. Against a server that speaks the
OpenAI API only (llama.cpp's, Ollama, a hosted API) a recording then waited — a missing
``/health`` holds every rollout forever, a 404 on ``/generate`` is retried by tenacity and by the
env — until it was killed. One ``GET <root>/generate`` settles it in milliseconds and sends no
prompt: vLLM and SGLang serve ``/generate`` for POST and answer a GET with 405, a server
without the route answers 404. Anything else (no answer, another status) is left to the run
and to the dead-endpoint guard.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from hermes_replay._errors import HermesReplayError

__all__ = ["NoGenerateEndpoint", "check_generate", "generate_root"]

TIMEOUT = 5.0


class NoGenerateEndpoint(HermesReplayError):
    """``--server-type vllm|sglang`` against an endpoint that has no ``/generate``."""


def generate_root(base_url: str) -> str:
    """The server root atroposlib sends ``/generate`` to (its rule: ``/v1`` taken out)."""
    return base_url.replace("/v1", "").rstrip("/")


def _status(url: str) -> int | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the endpoint itself
    try:
        with opener.open(urllib.request.Request(url, method="GET"), timeout=TIMEOUT) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):  # no answer, a bad URL: the run and its guards say so
        return None


def check_generate(base_url: str, server_type: str) -> None:
    """Raise :class:`NoGenerateEndpoint` when ``base_url``'s server answers 404 on
    ``/generate`` (see the module docstring)."""
    root = generate_root(base_url)
    if _status(root + "/generate") != 404:
        return
    raise NoGenerateEndpoint(
        f"--server-type {server_type}: {root}/generate answered HTTP 404 — this endpoint has no "
        "/generate, so it is not a vLLM/SGLang server (one that speaks the OpenAI API only, "
        f"like llama.cpp's, Ollama or a hosted API); atroposlib's {server_type} client would "
        "retry it until the run is killed.\n"
        "  next step: record with --server-type openai (managed_server then gets atroposlib's "
        "placeholder token ids), or give --endpoint the root of a vLLM/SGLang server")
