"""Shared by the replay-core tests: a tiny aiohttp server for non-model traffic."""

from __future__ import annotations

import json
from typing import Any

from _loopback_app import LoopbackApp
from aiohttp import web

SECRET = "sk-live0123456789abcdefghij"


class TinyServer(LoopbackApp):
    """127.0.0.1 server in its own thread: trajectory-API-like paths plus an echoing
    ``/v1/chat/completions`` that answers with a cookie and a key in its body (for redaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append((request.method, request.path_qs, body))
        if request.path.endswith("/chat/completions"):
            payload = json.loads(body or b"{}")
            reply = {"id": f"c{len(self.requests)}", "object": "chat.completion", "created": 0,
                     "model": payload.get("model", "m"),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant",
                                              "content": f"echo {len(self.requests)}"}}],
                     "debug_key": SECRET}
            resp = web.json_response(reply)
            resp.headers["Set-Cookie"] = "session=abcdef123456; Path=/"
            return resp
        return web.json_response({"ok": True, "path": request.path})


def lines_of(path: Any) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
