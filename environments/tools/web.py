"""Toolsets ``web`` (web_search, web_extract) and ``search`` (web_search alone).

The tools call the process's web backend (``web_backends``), chosen at environment startup from
``--env.web_backend``/``--env.web_corpus_dir`` and set here with ``set_web_backend``. Without a
backend they answer ``{"error": ...}`` saying how to configure one; an environment that enables
these toolsets never gets that far, because startup refuses to run without a backend.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .registry import define_toolset, register_tool
from .web_backends import WebBackend

__all__ = ["MAX_RESULTS", "current_web_backend", "set_web_backend", "web_extract", "web_search"]

MAX_RESULTS = 10
MAX_URLS = 5
_BACKEND: WebBackend | None = None
_LOCK = threading.Lock()


def set_web_backend(backend: WebBackend | None) -> None:
    global _BACKEND
    with _LOCK:
        _BACKEND = backend


def current_web_backend() -> WebBackend | None:
    return _BACKEND


def _backend() -> WebBackend:
    backend = _BACKEND
    if backend is None:
        raise LookupError("no web backend is configured: start the environment with "
                          "--env.web_backend tavily (TAVILY_API_KEY) or --env.web_backend "
                          "local_corpus --env.web_corpus_dir <folder>")
    return backend


def _run(fn: Any) -> str:
    try:
        result = fn()
    except LookupError as exc:
        result = {"error": str(exc)}
    return json.dumps(result, ensure_ascii=False)


@register_tool("web_search", "web", {
    "description": "Search the web. Returns titles, URLs and short snippets of matching pages.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "max_results": {"type": "integer", "description": f"At most {MAX_RESULTS}."},
        },
        "required": ["query"],
    },
})
def web_search(args: dict[str, Any], task_id: str) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return json.dumps({"error": "web_search needs a non-empty string argument 'query'"})
    n = args.get("max_results", 5)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return json.dumps({"error": f"max_results must be a positive integer: {n!r}"})
    return _run(lambda: _backend().search(query.strip(), min(n, MAX_RESULTS)))


@register_tool("web_extract", "web", {
    "description": "Fetch the readable text of web pages by URL (for example from web_search).",
    "parameters": {
        "type": "object",
        "properties": {
            "urls": {"type": "array", "items": {"type": "string"},
                     "description": f"Up to {MAX_URLS} URLs."},
        },
        "required": ["urls"],
    },
})
def web_extract(args: dict[str, Any], task_id: str) -> str:
    urls = args.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        return json.dumps({"error": "web_extract needs 'urls', a non-empty list of strings"})
    if len(urls) > MAX_URLS:
        return json.dumps({"error": f"web_extract takes at most {MAX_URLS} URLs per call"})
    return _run(lambda: _backend().extract(urls))


define_toolset("search", ["web_search"])
