"""A search API on 127.0.0.1 with Tavily's documented request and response shapes (not Tavily).

The real API cannot be reached from tests; this peer lets the Tavily backend be exercised over
real HTTP: ``POST /search`` ``{"query", "max_results", ...}`` → ``{"query", "results": [{"title",
"url", "content", "score"}], "response_time"}``; ``POST /extract`` ``{"urls": [...]}`` →
``{"results": [{"url", "raw_content"}], "failed_results": [{"url", "error"}]}``. It answers 401
without ``Authorization: Bearer <key>``. Not a test module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _loopback_app import LoopbackApp

PAGES = {
    "https://example.org/sky": ("Why the sky is blue",
                                "Sunlight is scattered by air molecules (Rayleigh scattering); "
                                "blue light scatters most."),
    "https://example.org/seasons": ("What causes the seasons",
                                    "The tilt of Earth's axis changes the angle of sunlight."),
}


class SearchApi(LoopbackApp):
    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.bodies: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/search", self._search)
        app.router.add_post("/extract", self._extract)

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.key}"

    async def _search(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        body = await request.json()
        self.bodies.append(body)
        words = set(str(body.get("query", "")).lower().split())
        results = [{"title": title, "url": url, "content": text, "score": 0.9}
                   for url, (title, text) in PAGES.items()
                   if words & set(f"{title} {text}".lower().replace(";", " ").split())]
        return web.json_response({"query": body.get("query"), "answer": None,
                                  "results": results[: int(body.get("max_results", 5))],
                                  "response_time": 0.01})

    async def _extract(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        body = await request.json()
        self.bodies.append(body)
        urls = body.get("urls") or []
        return web.json_response({
            "results": [{"url": u, "raw_content": f"{PAGES[u][0]}\n{PAGES[u][1]}"}
                        for u in urls if u in PAGES],
            "failed_results": [{"url": u, "error": "not found"} for u in urls if u not in PAGES],
            "response_time": 0.01})
