"""Health checks in replay: answered here, so a replay never waits on an endpoint that is gone.

atroposlib's ``OpenAIServer`` with ``health_check=True`` sends a real request every second
(``messages=[{"role": "user", "content": "hi"}]`` or ``prompt="hi"``, ``max_tokens=1``) and
holds every rollout until one succeeds; vLLM/SGLang servers poll ``GET /health`` (answered by
the session for hosts the cassette knows). Replayed from a cassette that never recorded a
ping, each ping would miss forever — a replay that hangs instead of failing. So a ping that
finds no recording gets a minimal successful reply, whatever the recorded argv says.
"""

from __future__ import annotations

import json
import time
from typing import Any

from hermes_replay._session.intercept import WireResponse

__all__ = ["health_reply", "is_health_ping"]

_PING_MESSAGES = [{"role": "user", "content": "hi"}]


def is_health_ping(request: dict[str, Any]) -> bool:
    """The stored (redacted) form of atroposlib's health-check request."""
    body = request.get("body")
    if not isinstance(body, dict) or body.get("max_tokens") != 1:
        return False
    url = str(request.get("url", "")).split("?", 1)[0].rstrip("/")
    if url.endswith("/chat/completions"):
        return body.get("messages") == _PING_MESSAGES and not body.get("tools")
    if url.endswith("/completions"):
        return body.get("prompt") == "hi"
    return False


def health_reply(request: dict[str, Any]) -> WireResponse:
    """A one-token answer in the shape the endpoint type returns."""
    body = request.get("body") or {}
    model = body.get("model", "hermes-replay")
    chat = str(request.get("url", "")).split("?", 1)[0].rstrip("/").endswith("/chat/completions")
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": "ok"}
    else:
        choice["text"] = "ok"
    payload = {"id": "hermes-replay-health", "object": "chat.completion" if chat
               else "text_completion", "created": int(time.time()), "model": model,
               "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                              "total_tokens": 2}}
    return WireResponse(200, [("content-type", "application/json")],
                        body=json.dumps(payload).encode("utf-8"))
