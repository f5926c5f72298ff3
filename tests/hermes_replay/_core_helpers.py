"""Shared by the replay-core tests: a tiny aiohttp server for non-model traffic."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import web

SECRET = "sk-live0123456789abcdefghij"


class TinyServer:
    """127.0.0.1 server in its own thread: trajectory-API-like paths plus an echoing
    ``/v1/chat/completions`` that answers with a cookie and a key in its body (for redaction)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0

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

    def __enter__(self) -> TinyServer:
        started = threading.Event()

        async def start() -> None:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            started.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(start())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def lines_of(path: Any) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
