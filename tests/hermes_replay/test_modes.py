"""Modes (record, replay, auto, passthrough), strictness, atomic writes, outcomes, atroposlib."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import openai
import pytest
from _core_helpers import lines_of

import hermes_replay
from hermes_replay._cassette import CassetteHeader, partial_path, write_cassette
from hermes_replay._cassette.matching import Matcher
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def _ask(base: str, rollout: str, questions: list[str], *, retries: int = 0) -> list[str]:
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=retries)
    out = []
    with hermes_replay.rollout(rollout):
        messages: list[dict] = []
        for q in questions:
            messages.append({"role": "user", "content": q})
            resp = client.chat.completions.create(model="m", messages=messages)
            out.append(resp.choices[0].message.content or "")
            messages.append({"role": "assistant", "content": out[-1]})
    return out


def _record(path: Path, plan: dict[str, list[str]], seed: int = 0) -> tuple[str, dict]:
    with ScriptedEndpoint(script="generic", seed=seed) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"):
            got = {rid: _ask(base, rid, qs) for rid, qs in plan.items()}
    return base, got


def test_replay_of_a_missing_cassette_says_how_to_record_it(tmp_path: Path) -> None:
    with pytest.raises(hermes_replay.CassetteError, match="no such cassette") as info:
        with hermes_replay.cassette(tmp_path / "none.jsonl"):
            pass
    assert "record" in str(info.value)
    with pytest.raises(ValueError, match="replay, record, passthrough, auto"):
        hermes_replay.cassette(tmp_path / "x.jsonl", "rewind")  # type: ignore[arg-type]


def test_unused_recordings_are_reported_and_strict_fails(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    base, _ = _record(path, {"a": ["one", "two"], "b": ["one"]})
    with hermes_replay.cassette(path, "replay") as session:
        _ask(base, "a", ["one"])
    assert session.unused == [("a", 1), ("b", 0)]
    assert any("2 recording(s) never used" in line for line in session.summary().lines())
    with pytest.raises(hermes_replay.UnusedRecordings, match=r"a#1, b#0"):
        with hermes_replay.cassette(path, "replay", strict=True):
            _ask(base, "a", ["one"])
    with hermes_replay.cassette(path, "replay", strict=True):  # everything used: fine
        _ask(base, "a", ["one", "two"])
        _ask(base, "b", ["one"])


def test_auto_replays_hits_records_misses_and_writes_the_union(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _, old = _record(path, {"a": ["one", "two"], "b": ["one", "two"], "z": ["kept"]}, seed=1)
    with ScriptedEndpoint(script="generic", seed=2) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "auto") as session:
            got = {"a": _ask(base, "a", ["one", "two"]),          # all hits
                   "b": _ask(base, "b", ["one", "changed"]),      # hit, then a miss
                   "c": _ask(base, "c", ["new"])}                  # all new
        served_live = [p for p, _ in ep.requests if p.endswith("/chat/completions")]
    assert len(served_live) == 2  # b's changed turn and c; nothing else went live
    assert got["a"] == old["a"] and got["b"][0] == old["b"][0]
    summary = session.summary()
    assert (summary.recorded, summary.interactions) == (2, 5)
    cassette = hermes_replay.load_cassette(path)
    assert {rid: len(r.interactions) for rid, r in cassette.rollouts.items()} == {
        "a": 2, "b": 2, "c": 1, "z": 1}
    with hermes_replay.cassette(path, "replay") as replay:  # the union replays everything
        assert _ask(base, "a", ["one", "two"]) == got["a"]
        assert _ask(base, "b", ["one", "changed"]) == got["b"]
        assert _ask(base, "c", ["new"]) == got["c"]
        assert _ask(base, "z", ["kept"]) == old["z"]
    assert replay.unused == []


def test_auto_creates_a_missing_cassette(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        with hermes_replay.cassette(path, "auto"):
            _ask(ep.base_url, "a", ["one"])
    assert len(hermes_replay.load_cassette(path).interactions) == 1


def test_passthrough_writes_nothing_and_blocks_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        with hermes_replay.cassette(path, "passthrough") as session:
            _ask(ep.base_url, "a", ["one", "two"])
        assert len(ep.requests) == 2
    assert not path.exists() and not partial_path(path).exists()
    assert list(session.summary().lines()) == [
        "passthrough: 2 LLM request(s) went live, nothing written"]


def test_record_replaces_an_existing_cassette_only_on_clean_exit(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    _record(path, {"old": ["one"]})
    before = path.read_bytes()
    events = []
    with ScriptedEndpoint(script="generic") as ep:
        with pytest.raises(RuntimeError, match="env crashed"):
            with hermes_replay.cassette(path, "record", on_event=events.append):
                _ask(ep.base_url, "new", ["one", "two"])
                raise RuntimeError("env crashed")
    assert path.read_bytes() == before
    partial = hermes_replay.load_cassette(partial_path(path))
    assert not partial.complete and [i.rollout for i in partial.interactions] == ["new", "new"]
    assert events[-1].kind == "interrupted" and events[-1].url == str(partial_path(path))
    assert [e.kind for e in events[:-1]] == ["record", "record"]
    _record(path, {"new": ["one"]})  # a clean run replaces it and removes the journal
    assert list(hermes_replay.load_cassette(path).rollouts) == ["new"]
    assert not partial_path(path).exists()


def test_sigkill_mid_recording_leaves_old_cassette_intact(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    write_cassette(path, CassetteHeader(env_name="old"), [])
    before = path.read_bytes()
    helper_dirs = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
    # hermes_replay is imported before the helper folders join the path: tests/hermes_replay
    # would otherwise shadow it as a namespace package when pytest runs from that folder
    script = textwrap.dedent(f"""
        import sys
        import httpx, hermes_replay
        sys.path[:0] = {helper_dirs!r}
        from _core_helpers import TinyServer
        with TinyServer() as server, httpx.Client() as client:
            with hermes_replay.cassette({str(path)!r}, "record"):
                for i in range(100000):
                    with hermes_replay.rollout(f"r{{i}}"):
                        client.post(server.url + "/v1/chat/completions", json={{
                            "model": "m", "messages": [{{"role": "user", "content": str(i)}}]}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = partial_path(path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if journal.exists() and journal.read_text().count('"interaction"') >= 5:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the recording subprocess never wrote 5 interactions")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert path.read_bytes() == before
    partial = hermes_replay.load_cassette(journal)
    assert not partial.complete and len(partial.interactions) >= 5
    assert all(i.response["status"] == 200 for i in partial.interactions)


def test_outcomes_are_recorded_and_compared_on_replay(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic") as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record", header={"env_name": "demo",
                                                            "command": ["process"]}):
            hermes_replay.annotate(tokenizer={"name": "tiny", "fingerprint": "abc"},
                                   group_size=2)
            for rid, reward in (("a", 1.0), ("b", 0.0)):
                with hermes_replay.rollout(rid) as scope:
                    _ask(base, rid, ["q"])
                    scope.report(reward=reward, turns_used=1)
    header = lines_of(path)[0]
    assert header["env_name"] == "demo" and header["command"] == ["process"]
    assert header["tokenizer"] == {"name": "tiny", "fingerprint": "abc"}
    assert header["extra"] == {"group_size": 2, "matcher": Matcher.build().signature(),
                               "stages": True}  # its recorder marks reward calls
    assert header["model"] == "m"
    assert header["base_url"] == base and header["endpoint_type"] == "openai"
    outcomes = [r for r in lines_of(path) if r["type"] == "outcome"]
    assert outcomes == [{"type": "outcome", "rollout": "a", "reward": 1.0, "turns_used": 1},
                        {"type": "outcome", "rollout": "b", "reward": 0.0, "turns_used": 1}]
    with hermes_replay.cassette(path, "replay") as session:
        for rid, reward in (("a", 1.0), ("b", 1.0)):  # b's reward function changed
            with hermes_replay.rollout(rid) as scope:
                _ask(base, rid, ["q"])
                scope.report(reward=reward, turns_used=1)
    summary = session.summary()
    assert summary.mean_reward == 1.0
    assert summary.changed_rewards == [("b", 0.0, 1.0)]
    assert session.outcomes["b"].recorded == {"reward": 0.0, "turns_used": 1}
    assert "reward changed: b: 0.0 -> 1.0" in list(summary.lines())


def test_a_miss_the_caller_let_through_becomes_the_blocks_cassette_miss(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    base, _ = _record(path, {"a": ["one"]})
    with pytest.raises(hermes_replay.CassetteMiss) as info:
        with hermes_replay.cassette(path, "replay"):
            _ask(base, "a", ["something else"])
    assert isinstance(info.value.__cause__, hermes_replay.RequestNotRecorded)
    assert "1 request(s) had no matching recording" in str(info.value)
    assert "something else" in str(info.value)


def test_a_miss_is_noted_on_another_error_that_ended_the_block(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    base, _ = _record(path, {"a": ["one"]})
    with pytest.raises(KeyError) as info:
        with hermes_replay.cassette(path, "replay"):
            try:
                _ask(base, "a", ["something else"])
            except hermes_replay.RequestNotRecorded:
                raise KeyError("the test's own error") from None
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "1 request(s) had no matching recording" in notes and "something else" in notes


async def test_atroposlib_server_manager_records_and_replays(tmp_path: Path) -> None:
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager

    path = tmp_path / "atropos.jsonl"

    async def run(base: str) -> list[str]:
        manager = ServerManager([APIServerConfig(
            model_name="m", base_url=base, api_key="sk-atropos-0123456789abcdef",
            server_type="openai", health_check=False, timeout=30)])
        out = []
        for slot in range(3):
            with hermes_replay.rollout(f"train-x-0-{slot}"):
                messages = [{"role": "user", "content": "List the files."}]
                for _ in range(2):
                    completion = await manager.chat_completion(messages=messages, n=1,
                                                               temperature=1.0)
                    reply = completion.choices[0].message.content or ""
                    out.append(reply)
                    messages = [*messages, {"role": "assistant", "content": reply},
                                {"role": "user", "content": "Go on."}]
        return out

    with ScriptedEndpoint(script="generic", seed=21) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(base)
    async with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert await run(base) == recorded
    assert session.summary().interactions == 6
    assert "sk-atropos-0123456789abcdef" not in path.read_text()
    assert json.loads(path.read_text().splitlines()[0])["sampling"] == {"n": 1,
                                                                       "temperature": 1.0}


def test_a_thousand_interactions_each_replay_their_own_response(tmp_path: Path) -> None:
    """Keyed lookups stay right at scale (how their cost grows is measured in benchmarks/)."""
    import httpx

    from hermes_replay._cassette import Interaction

    url = "http://127.0.0.1:9/v1/chat/completions"
    inters = []
    for i in range(1000):
        body = {"model": "m", "messages": [{"role": "user", "content": f"q{i // 2}"}]}
        if i % 2:
            body["messages"] += [{"role": "assistant", "content": "a"},
                                 {"role": "user", "content": "more"}]
        inters.append(Interaction(rollout=f"r{i // 2}", seq=i % 2, kind="chat",
                                  request={"method": "POST", "url": url, "headers": {},
                                           "body": body},
                                  response={"status": 200, "headers": {}, "body": {"i": i}}))
    for k in range(300):  # identical scope-less requests: fingerprint + order of issue
        inters.append(Interaction(rollout=None, seq=k, kind="chat", request={
            "method": "POST", "url": url, "headers": {}, "body": {"same": True}},
            response={"status": 200, "headers": {}, "body": {"k": k}}))
    path = tmp_path / "big.jsonl"
    write_cassette(path, CassetteHeader(), inters)
    with hermes_replay.cassette(path, "replay", strict=True), httpx.Client() as client:
        for i in range(1000):
            with hermes_replay.rollout(f"r{i // 2}"):
                assert client.post(url, json=inters[i].request["body"]).json() == {"i": i}
        for k in range(300):
            assert client.post(url, json={"same": True}).json() == {"k": k}


def test_a_response_arriving_after_the_block_ended_is_dropped(tmp_path: Path) -> None:
    from hermes_replay._session.intercept import WireRequest, WireResponse

    path = tmp_path / "c.jsonl"
    with hermes_replay.cassette(path, "record") as session:
        ex = session.begin(WireRequest("POST", "http://h/v1/chat/completions", [], b"{}"))
    ex.finish(WireResponse(200, [("content-type", "application/json")], body=b"{}"))
    assert [r["type"] for r in lines_of(path)] == ["header"]
    assert session.summary().recorded == 0
