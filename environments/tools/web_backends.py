"""Backends of the ``web``/``search`` toolsets: a small interface, one HTTP API, one local corpus.

A backend is a plain class with two blocking methods (the tools run in the tool thread pool)::

    search(query: str, max_results: int) -> dict   # {"results": [{"title", "url", "content"}]}
    extract(urls: list[str]) -> dict               # {"results": [{"url", "title", "content"}],
                                                   #  "failed": [{"url", "error"}]}

and reports failures as ``{"error": ...}`` (the agent loop counts that as a tool error). Register
one with ``register_web_backend(name, factory)``; ``make_web_backend(name, corpus_dir)`` builds it.

* ``tavily`` — the Tavily HTTP API (``POST /search`` with ``{"query", "max_results",
  "search_depth"}``, ``POST /extract`` with ``{"urls", "extract_depth"}``, key as
  ``Authorization: Bearer``), key from ``TAVILY_API_KEY``, base URL from ``TAVILY_BASE_URL``
  (default ``https://api.tavily.com``). Its URL prefix is declared to hermes-replay as recorded
  traffic, so inside a cassette the calls are recorded with the rollout (key scrubbed) and
  replayed without network or key.
* ``local_corpus`` — pages in a folder (``.md``, ``.txt``, ``.html``), for tests, demos and
  offline work. A page's URL is its first line ``url: <URL>`` if it has one, else
  ``corpus://<relative path>``; search ranks pages by how often the query's words occur.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import hermes_replay

__all__ = [
    "LocalCorpusBackend",
    "TavilyBackend",
    "WebBackend",
    "WebBackendUnavailable",
    "make_web_backend",
    "register_web_backend",
    "web_backend_names",
]

SNIPPET_CHARS = 500
PAGE_CHARS = 20_000


class WebBackendUnavailable(ValueError):
    """A web backend cannot be built (no key, no corpus folder …); the message says what to set."""


class WebBackend(Protocol):
    name: str

    def search(self, query: str, max_results: int) -> dict[str, Any]: ...

    def extract(self, urls: list[str]) -> dict[str, Any]: ...


# -- Tavily ------------------------------------------------------------------------------------


class TavilyBackend:
    """The Tavily search/extract API over HTTP (httpx, sync; runs in the tool thread pool)."""

    name = "tavily"
    key_var = "TAVILY_API_KEY"
    default_base_url = "https://api.tavily.com"

    def __init__(self, api_key: str | None, base_url: str | None = None,
                 timeout: float = 30.0) -> None:
        # api_key may be None only when a cassette replays the calls (checked by the caller)
        self._api_key = api_key
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout = timeout
        # these calls are part of the rollout: record them with it, replay them from it
        for path in ("/search", "/extract"):
            hermes_replay.recorded_endpoint(self.base_url + path)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            with httpx.Client(timeout=self.timeout) as client:
                response = client.post(f"{self.base_url}{path}", json=body, headers=headers)
        except httpx.HTTPError as exc:
            return {"error": f"tavily {path} request failed: {type(exc).__name__}: {exc}"}
        if response.status_code >= 400:
            return {"error": f"tavily {path} answered HTTP {response.status_code}: "
                             f"{response.text[:300]}"}
        try:
            data = response.json()
        except ValueError:
            return {"error": f"tavily {path} answered something that is not JSON"}
        return data if isinstance(data, dict) else {"error": f"tavily {path}: unexpected reply"}

    def search(self, query: str, max_results: int) -> dict[str, Any]:
        data = self._post("/search", {"query": query, "max_results": max_results,
                                      "search_depth": "basic", "include_answer": False})
        if "error" in data:
            return data
        results = [{"title": str(r.get("title", "")), "url": str(r.get("url", "")),
                    "content": str(r.get("content", ""))[:SNIPPET_CHARS]}
                   for r in data.get("results") or [] if isinstance(r, dict)]
        return {"query": query, "results": results}

    def extract(self, urls: list[str]) -> dict[str, Any]:
        data = self._post("/extract", {"urls": list(urls), "extract_depth": "basic"})
        if "error" in data:
            return data
        results = [{"url": str(r.get("url", "")), "title": str(r.get("title") or ""),
                    "content": str(r.get("raw_content") or "")[:PAGE_CHARS]}
                   for r in data.get("results") or [] if isinstance(r, dict)]
        failed = [{"url": str(r.get("url", "")), "error": str(r.get("error", "failed"))}
                  for r in data.get("failed_results") or [] if isinstance(r, dict)]
        return {"results": results, "failed": failed}


def _tavily(corpus_dir: str | None, replaying: bool) -> TavilyBackend:
    key = os.environ.get(TavilyBackend.key_var, "").strip() or None
    if key is None and not replaying:
        raise WebBackendUnavailable(
            f"web backend 'tavily' needs an API key in {TavilyBackend.key_var} (none is set). "
            "Set it, or use --env.web_backend local_corpus --env.web_corpus_dir <folder of "
            ".md/.txt pages> to run offline.")
    return TavilyBackend(key, os.environ.get("TAVILY_BASE_URL") or None)


# -- local corpus ------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_TAGS = re.compile(r"<[^>]+>")
_HTML_TITLE = re.compile(r"<(title|h1)\b[^>]*>(.*?)</\1>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class _Page:
    url: str
    title: str
    text: str
    words: tuple[str, ...]


class LocalCorpusBackend:
    """Search and extract over a folder of text pages; deterministic, no network."""

    name = "local_corpus"
    suffixes = (".md", ".txt", ".html", ".htm")

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        root = Path(folder)
        if not root.is_dir():
            raise WebBackendUnavailable(
                f"web corpus folder {str(root)!r} does not exist; set --env.web_corpus_dir to a "
                "folder of .md/.txt/.html pages")
        self.root = root
        self.pages = [self._page(p) for p in sorted(root.rglob("*"))
                      if p.is_file() and p.suffix.lower() in self.suffixes]
        if not self.pages:
            raise WebBackendUnavailable(f"web corpus folder {str(root)!r} holds no .md/.txt/"
                                        ".html pages")
        self._by_url = {p.url: p for p in self.pages}
        n = len(self.pages)
        df: dict[str, int] = {}
        for page in self.pages:
            for word in set(page.words):
                df[word] = df.get(word, 0) + 1
        self._idf = {w: math.log(1 + n / c) for w, c in df.items()}

    def _page(self, path: Path) -> _Page:
        text = path.read_text(encoding="utf-8", errors="replace")
        first, _, rest = text.partition("\n")
        if first.lower().startswith("url:"):
            url, text = first[4:].strip(), rest
        else:
            url = f"corpus://{path.relative_to(self.root).as_posix()}"
        heading = None
        if path.suffix.lower() in (".html", ".htm"):
            found = _HTML_TITLE.search(text)
            heading = _TAGS.sub(" ", found.group(2)).strip() if found else None
            text = _TAGS.sub(" ", text)
        title = heading or next(
            (line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), path.stem)
        return _Page(url, title, text.strip(), tuple(_WORD.findall(text.lower())))

    def search(self, query: str, max_results: int) -> dict[str, Any]:
        terms = _WORD.findall(query.lower())
        if not terms:
            return {"error": "web_search needs a query with at least one word"}
        scored = []
        for order, page in enumerate(self.pages):
            counts = {t: page.words.count(t) for t in set(terms)}
            score = sum(self._idf.get(t, 0.0) * math.log(1 + c) for t, c in counts.items())
            if score > 0:
                scored.append((-score, order, page))
        scored.sort(key=lambda s: (s[0], s[1]))
        results = [{"title": p.title, "url": p.url, "content": _snippet(p.text, terms)}
                   for _, _, p in scored[:max_results]]
        return {"query": query, "results": results}

    def extract(self, urls: list[str]) -> dict[str, Any]:
        results, failed = [], []
        for url in urls:
            page = self._by_url.get(url)
            if page is None:
                failed.append({"url": url, "error": "not in the local corpus"})
            else:
                results.append({"url": url, "title": page.title, "content": page.text[:PAGE_CHARS]})
        return {"results": results, "failed": failed}


def _snippet(text: str, terms: list[str]) -> str:
    lowered = text.lower()
    hits = [i for i in (lowered.find(t) for t in terms) if i >= 0]
    start = max(0, min(hits) - 80) if hits else 0
    return " ".join(text[start:start + SNIPPET_CHARS].split())


def _local_corpus(corpus_dir: str | None, replaying: bool) -> LocalCorpusBackend:
    if not corpus_dir:
        raise WebBackendUnavailable(
            "web backend 'local_corpus' needs --env.web_corpus_dir <folder of .md/.txt pages>")
    return LocalCorpusBackend(corpus_dir)


# -- registry ----------------------------------------------------------------------------------

Factory = Callable[[str | None, bool], WebBackend]
_FACTORIES: dict[str, Factory] = {"tavily": _tavily, "local_corpus": _local_corpus}


def register_web_backend(name: str, factory: Factory) -> None:
    """Add a backend: ``factory(corpus_dir, replaying) -> backend``; raise
    ``WebBackendUnavailable`` with what to set when it cannot be built."""
    if name in _FACTORIES or name == "auto":
        raise ValueError(f"web backend {name!r} is already registered")
    _FACTORIES[name] = factory


def web_backend_names() -> list[str]:
    return sorted(_FACTORIES)


def make_web_backend(name: str, corpus_dir: str | None = None, *,
                     replaying: bool = False) -> WebBackend:
    """Build backend ``name``; ``auto`` picks local_corpus when a folder is given, else tavily.

    ``replaying``: a cassette replays the HTTP calls, so an API key is not needed."""
    if name == "auto":
        name = "local_corpus" if corpus_dir else "tavily"
    factory = _FACTORIES.get(name)
    if factory is None:
        raise WebBackendUnavailable(
            f"unknown web backend {name!r}; available: {', '.join(web_backend_names())} "
            "(--env.web_backend)")
    return factory(corpus_dir, replaying)
