"""A small aiohttp app on 127.0.0.1 in its own thread, for tests that need a peer over real
HTTP that is not a model (trajectory-API-like paths, canned garbage, echo servers).

Subclasses add routes in ``routes(app)``; the start/stop plumbing lives only here.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class LoopbackApp:
    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        ready = threading.Event()

        async def start() -> None:
            app = web.Application()
            self.routes(app)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            self.port = self._runner.addresses[0][1]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(start())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the loopback test server did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
