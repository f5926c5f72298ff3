"""Web backends: the Tavily API over HTTP (recorded with the rollout, replayed with no key or
network) and the offline local corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _search_api import SearchApi

import hermes_replay
from environments.tools.web_backends import (
    LocalCorpusBackend,
    TavilyBackend,
    WebBackendUnavailable,
    make_web_backend,
)

KEY = "tvly-dev-SECRETkey0123456789abcdef"


@pytest.fixture
def api(monkeypatch):
    with SearchApi(KEY) as server:
        monkeypatch.setenv("TAVILY_BASE_URL", server.url)
        yield server


def _use(backend) -> tuple[dict, dict]:
    return (backend.search("why is the sky blue", 3),
            backend.extract(["https://example.org/sky", "https://example.org/none"]))


def test_tavily_follows_the_documented_request_shape(api, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    hits, pages = _use(make_web_backend("tavily"))
    assert api.bodies[0] == {"query": "why is the sky blue", "max_results": 3,
                             "search_depth": "basic", "include_answer": False}
    assert api.bodies[1] == {"urls": ["https://example.org/sky", "https://example.org/none"],
                             "extract_depth": "basic"}
    assert hits["results"][0]["url"] == "https://example.org/sky"
    assert pages["results"][0]["content"].startswith("Why the sky is blue")
    assert pages["failed"] == [{"url": "https://example.org/none", "error": "not found"}]


def test_tavily_errors_are_tool_errors_and_a_missing_key_stops(api, monkeypatch):
    bad = TavilyBackend("tvly-wrong-key-000000000000", api.url)
    assert "HTTP 401" in bad.search("x", 1)["error"]
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(WebBackendUnavailable, match=r"TAVILY_API_KEY.*local_corpus"):
        make_web_backend("tavily")


def test_tavily_traffic_is_recorded_with_the_rollout_and_replayed_without_key_or_network(
        monkeypatch, tmp_path):
    cassette = tmp_path / "web.jsonl"
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    with SearchApi(KEY) as api:
        monkeypatch.setenv("TAVILY_BASE_URL", api.url)
        with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("train-web-0-0"):
            recorded = _use(make_web_backend("tavily"))
    text = cassette.read_text()
    assert KEY not in text and "SECRETkey" not in text  # scrubbed before it reached disk
    lines = [json.loads(line) for line in text.splitlines()]
    inters = [rec for rec in lines if rec.get("type") == "interaction"]
    assert [(i["rollout"], i["seq"], i["kind"]) for i in inters] == [
        ("train-web-0-0", 0, "tool_http"), ("train-web-0-0", 1, "tool_http")]

    # the API is gone (the server stopped above) and so is the key
    monkeypatch.delenv("TAVILY_API_KEY")
    with hermes_replay.cassette(cassette, "replay", strict=True) as session, \
            hermes_replay.rollout("train-web-0-0"):
        assert hermes_replay.active_mode() == "replay"
        replayed = _use(make_web_backend("tavily", replaying=True))
    assert replayed == recorded and session.summary().misses == []


def test_a_replay_that_asks_something_unrecorded_fails(api, monkeypatch, tmp_path):
    cassette = tmp_path / "web.jsonl"
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    with hermes_replay.cassette(cassette, "record"), hermes_replay.rollout("r"):
        make_web_backend("tavily").search("sky", 2)
    with pytest.raises(hermes_replay.CassetteMiss), \
            hermes_replay.cassette(cassette, "replay"), hermes_replay.rollout("r"):
        answer = make_web_backend("tavily", replaying=True).search("seasons", 2)
        assert "HTTP 404" in answer["error"]  # the miss reaches the tool as an error, too


def test_local_corpus_ranks_by_query_words_and_extracts_by_url(tmp_path: Path):
    (tmp_path / "a.md").write_text("# Photosynthesis\nPlants turn light into glucose.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("url: https://example.org/light\nLight light light "
                                            "travels fast.\n")
    (tmp_path / "c.html").write_text("<h1>Compilers</h1><p>translate source code</p>")
    corpus = LocalCorpusBackend(tmp_path)
    hits = corpus.search("light", 5)["results"]
    assert [h["url"] for h in hits] == ["https://example.org/light", "corpus://a.md"]
    assert corpus.search("compilers source", 5)["results"][0]["title"] == "Compilers"
    assert corpus.search("???", 5)["error"]
    got = corpus.extract(["corpus://a.md"])["results"][0]
    assert got["title"] == "Photosynthesis" and "glucose" in got["content"]
    assert make_web_backend("auto", str(tmp_path)).name == "local_corpus"
    (tmp_path / "empty").mkdir()
    with pytest.raises(WebBackendUnavailable, match="holds no"):
        LocalCorpusBackend(tmp_path / "empty")
    with pytest.raises(WebBackendUnavailable, match="unknown web backend 'exa'"):
        make_web_backend("exa")
