"""Re-scoring a recorded run with a live judge: ``replay --llm live=reward --live-base-url URL
[--live-api-key-env VAR] [--rescore K]``.

The shipped research_judge_env cassette is replayed with its judge's calls (the reward calls)
sent to a scripted endpoint on 127.0.0.1 while the policy's calls replay from the cassette.
The endpoint's judge gives every call of the k-th run the same score, a different one per run,
so K runs have a spread the test knows in advance; it also echoes the user's key in its reply,
as a careless proxy might, so the scrubbing of what is written is tried on a key that really
crossed the wire. Each failure path exits 1 naming the cassette and the next step.
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import threading
from pathlib import Path

import pytest
from conftest import trust

from hermes_replay import load_cassette
from hermes_replay._cassette import write_cassette
from hermes_replay._runner import netblock
from hermes_replay._session.live_calls import LiveCalls, LivePattern
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import Reply, Rule, Script, ScriptedEndpoint

ROOT = Path(__file__).resolve().parents[2]
ENV = "research_judge_env"
KEY_VAR = "HERMES_TEST_JUDGE_KEY"
KEY = "judgekey-7f3a9c1e5b2d4086aa11c0ffee"  # recognizable; no credential shape of its own
SCORES = (5, 7, 9)  # the judge's score (0-10) in run 1, 2, 3


def _judge_calls(cassette: Path) -> dict[str, int]:
    """Per rollout: how many reward calls its recording made (requests beyond its turns)."""
    loaded = load_cassette(cassette)
    return {rid: len(rec.interactions) - int(rec.outcome["turns_used"])
            for rid, rec in loaded.rollouts.items()}


class _RunJudge:
    """A judge whose score depends only on which run a call belongs to: the first ``per_run``
    calls get ``SCORES[0]``, the next ``per_run`` ``SCORES[1]`` … (order within a run does not
    matter, so concurrent rollouts cannot flake it). Its reply echoes the key."""

    def __init__(self, per_run: int) -> None:
        self.per_run, self.calls, self._lock = per_run, 0, threading.Lock()

    def script(self) -> Script:
        def reply(conv: object, rng: object) -> Reply:
            with self._lock:
                run, self.calls = self.calls // self.per_run, self.calls + 1
            score = SCORES[min(run, len(SCORES) - 1)]
            return Reply(content=json.dumps({"score": score, "reason": f"graded with {KEY}"}))

        return Script("run-judge", [
            Rule("judge", lambda c: "Answer to grade:" in c.last_user_text, reply)])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project holding the env file and a copy of its shipped cassettes."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    (tmp_path / "environments").mkdir()
    shutil.copy(ROOT / "environments" / f"{ENV}.py", tmp_path / "environments" / f"{ENV}.py")
    (tmp_path / "cassettes" / ENV).mkdir(parents=True)
    for name in ("process.jsonl", "probe-known-good.jsonl"):
        shutil.copy(ROOT / "cassettes" / ENV / name, tmp_path / "cassettes" / ENV / name)
    trust(tmp_path)  # the user's project (copied here, not recorded here), env files and all
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_VAR, KEY)
    return tmp_path


def _live(base_url: str, pattern: str = "reward") -> list[str]:
    return ["--llm", f"live={pattern}", "--live-base-url", base_url,
            "--live-api-key-env", KEY_VAR]


def _files_holding(root: Path, text: str) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and text.encode() in path.read_bytes():
            found.append(path)
    return found


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- the main path


@pytest.mark.slow
def test_rescore_k_sends_only_the_judge_live_and_reports_its_spread(project: Path, capsys) -> None:
    cassette = project / "cassettes" / ENV / "process.jsonl"
    before = cassette.read_bytes()
    judge_calls = _judge_calls(cassette)
    judged = {rid for rid, n in judge_calls.items() if n}
    per_run = sum(judge_calls.values())
    assert judged and per_run  # the recording did call its judge
    judge = _RunJudge(per_run)
    out = project / "out"
    with ScriptedEndpoint(script=judge.script(), seed=0) as ep:
        code = main(["replay", str(cassette), "--out", str(out), "-j", "1", "--no-report",
                     *_live(ep.base_url), "--rescore", "3"])
        requests, auths, base_url = list(ep.requests), list(ep.authorizations), ep.base_url
    printed = capsys.readouterr()
    assert code == 0, printed.err  # rewards changed: shown, not fatal without --fail-on-change

    # only the judge went live: K runs x its recorded calls, each a judge prompt, with the key
    posts = [body for path, body in requests if path.endswith("/chat/completions")]
    assert len(posts) == 3 * per_run
    assert all("Answer to grade:" in body["messages"][-1]["content"] for body in posts)
    assert not any(body.get("tools") for body in posts)  # no policy turn reached it
    assert set(auths) == {f"Bearer {KEY}"}

    # K rewards per rollout, recorded beside mean and spread, in replay.json and the output
    row = json.loads((out / "replay.json").read_text())["rows"][0]["summary"]
    stats = row["rescore"]
    recorded = {rid: rec.outcome["reward"] for rid, rec in load_cassette(cassette).rollouts.items()}
    # every policy turn answered from the cassette: none missed, none left unused
    assert (row["misses"], row["unused"], row["rollouts"]) == (0, 0, len(recorded))
    assert set(stats) == set(recorded)
    expected = [s / 10 for s in SCORES]
    for rid, s in stats.items():
        assert len(s["rewards"]) == 3
        assert s["recorded"] == pytest.approx(recorded[rid])
        if rid in judged:
            assert s["rewards"] == pytest.approx(expected)
            assert s["mean"] == pytest.approx(statistics.fmean(expected))
            assert s["stdev"] == pytest.approx(statistics.pstdev(expected))
            assert (s["min"], s["max"]) == pytest.approx((expected[0], expected[-1]))
    assert "judge stdev" in printed.out
    some = sorted(judged)[0]
    assert f"{some}: {recorded[some]:.3f} -> {statistics.fmean(expected):.3f} ± " \
           f"{statistics.pstdev(expected):.3f} [{expected[0]:.3f}–{expected[-1]:.3f}]" \
           in printed.out

    # the original is untouched; the new cassettes hold the judge's answers, scrubbed
    assert cassette.read_bytes() == before
    rescored = out / "process.rescored.jsonl"
    assert rescored.is_file() and (out / "process.rescored-3.jsonl").is_file()
    new = load_cassette(rescored)
    assert {rid: rec.outcome["reward"] for rid, rec in new.rollouts.items() if rid in judged} \
        == pytest.approx({rid: expected[0] for rid in judged})
    assert "<redacted" in rescored.read_text()  # the echoed key, scrubbed
    assert new.header.extra["rescored"]["endpoint"] == base_url
    assert _files_holding(project, KEY) == []  # outputs, logs, cassettes: nowhere on disk
    assert main(["verify", str(rescored)]) == 0

    # the new cassette replays offline (no endpoint runs now) and scores what run 1 scored
    capsys.readouterr()
    assert main(["replay", str(rescored), "--out", str(project / "again"), "-j", "1",
                 "--no-report", "--fail-on-change"]) == 0, capsys.readouterr().err
    assert _files_holding(project, KEY) == []


def test_one_live_run_writes_the_rescored_cassette_and_fail_on_change_fails(
        project: Path, capsys) -> None:
    cassette = project / "cassettes" / ENV / "probe-known-good.jsonl"
    judge = _RunJudge(sum(_judge_calls(cassette).values()))
    with ScriptedEndpoint(script=judge.script(), seed=0) as ep:
        code = main(["replay", str(cassette), "--out", "out", "-j", "1", "--no-report",
                     "--fail-on-change", *_live(ep.base_url)])
    printed = capsys.readouterr()
    assert code == 1  # the judge now pays 0.5 where the recording said otherwise
    assert "reward changed" in printed.out and "rescored cassette: " in printed.out
    assert Path("out/probe-known-good.rescored.jsonl").is_file()
    assert _files_holding(project, KEY) == []


# ----------------------------------------------------------------------------- failure paths


def _assert_failed(code: int, err: str, cassette: str, *needles: str) -> None:
    assert code == 1, err
    assert cassette in err and "next step" in err, err
    for needle in needles:
        assert needle in err, err
    assert not list(Path("out").glob("*.rescored*.jsonl"))  # nothing re-scored was written


def test_a_pattern_that_selects_no_call_fails_naming_it(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                     *_live(ep.base_url, "model=no-such-judge*")])
        assert ep.requests == []
    model = load_cassette(rel).header.model
    assert model
    _assert_failed(code, capsys.readouterr().err, rel, "live=model=no-such-judge*",
                   f"the models: {model}")  # and the models the requests did name


def test_a_live_endpoint_that_is_down_stops_the_run(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                 *_live(f"http://127.0.0.1:{_closed_port()}/v1")])
    _assert_failed(code, capsys.readouterr().err, rel, "--live-base-url", "could not connect")


def test_a_live_call_answered_with_an_error_fails(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                     *_live(ep.base_url.replace("/v1", "/nowhere"))])  # 404 for every call
    _assert_failed(code, capsys.readouterr().err, rel, "got no answer", "HTTP 404")


def test_a_policy_call_that_misses_fails_and_writes_nothing(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    edited = load_cassette(rel)
    first = edited.interactions[0]
    first.request["body"]["messages"][-1]["content"] += " (edited)"
    first.fingerprint = ""
    write_cassette(rel, edited.header, edited.interactions, edited.outcomes, edited.tool_calls)
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                     *_live(ep.base_url)])
    _assert_failed(code, capsys.readouterr().err, rel, "(edited)")


def test_an_env_that_crashes_fails(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    env = project / "environments" / f"{ENV}.py"
    source = env.read_text()
    marker = "    async def setup(self) -> None:\n"
    assert marker in source
    env.write_text(source.replace(marker, marker + "        raise RuntimeError('boom')\n"))
    # a copied project (no git, cassettes recorded elsewhere): the user's `trust` vouches
    # for the edited file (docs/reliability.md, the trust rule)
    trust(project)
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                     *_live(ep.base_url)])
        assert ep.requests == []
    _assert_failed(code, capsys.readouterr().err, rel, "exited with code")


def test_a_replay_that_ran_nothing_fails(project: Path, capsys) -> None:
    rel = f"cassettes/{ENV}/probe-known-good.jsonl"
    loaded = load_cassette(rel)
    header = loaded.header.model_copy(update={"command": [
        *loaded.header.command, "--env.total_steps", "0"]})
    write_cassette(rel, header, loaded.interactions, loaded.outcomes, loaded.tool_calls)
    with ScriptedEndpoint(script="examples", seed=0) as ep:
        code = main(["replay", rel, "--out", "out", "-j", "1", "--no-report",
                     *_live(ep.base_url)])
    _assert_failed(code, capsys.readouterr().err, rel, "ran 0 of")


@pytest.mark.parametrize(("flags", "says"), [
    (["--llm", "live=reward"], "--live-base-url"),
    (["--live-base-url", "http://127.0.0.1:9/v1"], "--llm live=PATTERN"),
    (["--rescore", "3"], "--llm live=PATTERN"),
    (["--llm", "replay", "--live-base-url", "http://127.0.0.1:9/v1"], "live=PATTERN"),
    (["--llm", "live=reward", "--live-base-url", "ftp://h/v1"], "not an http(s) URL"),
    (["--llm", "live=reward", "--live-base-url", "http://u:p@h/v1"], "carries credentials"),
    (["--llm", "live=reward", "--live-base-url", "http://127.0.0.1:9/v1",
      "--live-api-key-env", "HERMES_TEST_UNSET_VARIABLE"], "HERMES_TEST_UNSET_VARIABLE"),
    (["--llm", "live=reward", "--live-base-url", "http://127.0.0.1:9/v1", "--rescore", "0"],
     "1 or more"),
    (["--llm", "live=reward", "--live-base-url", "http://127.0.0.1:9/v1", "--twice"],
     "--rescore K"),
    (["--llm", "live=reward", "--live-base-url", "http://127.0.0.1:9/v1", "--tools",
      "execute"], "--tools"),
])
def test_combinations_that_cannot_work_are_usage_errors(project: Path, capsys, flags,
                                                        says) -> None:
    assert main(["replay", f"cassettes/{ENV}/process.jsonl", "--out", "out", *flags]) == 2
    assert says in capsys.readouterr().err
    assert not Path("out").exists()


def test_ray_and_the_env_file_form_are_refused(project: Path, capsys) -> None:
    live = ["--llm", "live=reward", "--live-base-url", "http://127.0.0.1:9/v1"]
    assert main(["replay", "cassettes", "--executor", "ray", *live]) == 2
    assert "--executor local only" in capsys.readouterr().err
    assert main(["replay", f"environments/{ENV}.py", *live, "--", "process"]) == 2
    assert "not ENV_FILE -- MODE" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the parts


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("reward", "reward", ""), ("judge", "reward", ""), ("model=gpt-4o*", "model", "gpt-4o*"),
    ("url=judge.internal:8000", "url", "judge.internal:8000"),
    ("https://judge.example/v1", "url", "https://judge.example/v1"), ("my-judge", "model",
                                                                      "my-judge"),
])
def test_patterns_parse(text: str, kind: str, value: str) -> None:
    assert LivePattern.parse(text) == LivePattern(kind, value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "model=", "url=", "size=3"])
def test_bad_patterns_say_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. (model|url)=|write one of"):
        LivePattern.parse(text)


def test_patterns_select_by_stage_model_and_host() -> None:
    url = "http://judge.internal:8000/v1/chat/completions"
    assert LivePattern.parse("reward").selects("reward", url, "m")
    assert not LivePattern.parse("reward").selects("agent", url, "m")
    assert LivePattern.parse("model=judge-*").selects("agent", url, "judge-large")
    assert not LivePattern.parse("model=judge-*").selects("agent", url, "policy")
    assert LivePattern.parse("url=judge.internal").selects("agent", url, None)
    assert LivePattern.parse("url=judge.internal:8000").selects("agent", url, None)
    assert not LivePattern.parse("url=judge.internal:9000").selects("agent", url, None)
    assert LivePattern.parse("http://judge.internal:8000/v1").selects("agent", url, None)


def test_a_live_request_goes_to_the_named_endpoint_with_the_named_key_only() -> None:
    from hermes_replay._session.intercept import WireRequest

    live = LiveCalls.build({"patterns": ["reward"], "base_url": "http://127.0.0.1:7/v1/",
                            "api_key_env": "K"}, {"K": KEY})
    wire = WireRequest("POST", "http://recorded.example:46095/v1/chat/completions?x=1",
                       [("Authorization", "Bearer placeholder"), ("X-Api-Key", "other"),
                        ("Content-Type", "application/json"), ("Host", "recorded.example")],
                       b"{}")
    out = live.outgoing(wire, ["/chat/completions", "/completions"])
    assert out.url == "http://127.0.0.1:7/v1/chat/completions?x=1"
    assert [(k.lower(), v) for k, v in out.headers] == [
        ("content-type", "application/json"), ("authorization", f"Bearer {KEY}")]
    assert KEY not in repr(live) and "K" in json.dumps(live.header_fields())
    assert KEY not in json.dumps(live.header_fields())


def test_the_network_block_lets_exactly_the_live_host_through() -> None:
    with netblock.block_network(allow=[("10.1.2.3", 8000)]):
        assert netblock._is_allowed(("10.1.2.3", 8000))
        assert not netblock._is_allowed(("10.1.2.3", 8001))
        assert not netblock._is_allowed(("10.1.2.4", 8000))
        assert netblock._is_allowed(("127.0.0.1", 1))
        assert netblock._resolvable("10.1.2.3") and not netblock._resolvable("example.com")
    with netblock.block_network(allow=[("judge.internal", 443)]):
        assert netblock._resolvable("judge.internal")
        assert not netblock._resolvable("other.internal")
    with netblock.block_network():
        assert not netblock._is_allowed(("10.1.2.3", 8000))
        assert not netblock._resolvable("judge.internal")


# ----------------------------------------------------------------------------- the session


def _judge_prompt(answer: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Grade it. Reply ONLY with JSON: {\"score\": n}."},
            {"role": "user", "content": f"Answer to grade: {answer}\nScore 0-10 as JSON."}]


def _record_plain(path: Path, base_url: str) -> None:
    """A plain loop (no ``scoring()``): per rollout a policy turn with model ``policy`` and a
    judge call with model ``judge`` — the judge is told apart only by its model name."""
    import openai

    import hermes_replay

    client = openai.OpenAI(base_url=base_url, api_key="sk-placeholder", max_retries=0)
    with hermes_replay.cassette(path, "record"):
        for rid in ("plain-r-0", "plain-r-1"):
            with hermes_replay.rollout(rid):
                client.chat.completions.create(
                    model="policy", temperature=0, messages=[
                        {"role": "user", "content": f"Say something about {rid}."}])
                client.chat.completions.create(model="judge", temperature=0,
                                               messages=_judge_prompt(rid))


def test_a_judge_told_apart_by_model_goes_live_and_the_rescored_cassette_replays(
        tmp_path: Path) -> None:
    import openai

    import hermes_replay

    recorded = tmp_path / "plain.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        _record_plain(recorded, ep.base_url)
        base_url = ep.base_url
    judge = _RunJudge(per_run=2)
    rescored = tmp_path / "plain.rescored.jsonl"
    client = openai.OpenAI(base_url=base_url, api_key="sk-placeholder", max_retries=0)
    with ScriptedEndpoint(script=judge.script(), seed=0) as live_ep:
        spec = {"patterns": ["model=jud*"], "base_url": live_ep.base_url, "api_key_env": "K"}
        live = LiveCalls.build(spec, {"K": KEY})
        with netblock.block_network(allow=[live.host_port()]), \
                hermes_replay.cassette(recorded, "replay", live=live) as session:
            for rid in ("plain-r-0", "plain-r-1"):
                with hermes_replay.rollout(rid):
                    client.chat.completions.create(  # the recorded endpoint is gone: replayed
                        model="policy", temperature=0, messages=[
                            {"role": "user", "content": f"Say something about {rid}."}])
                    reply = client.chat.completions.create(model="judge", temperature=0,
                                                           messages=_judge_prompt(rid))
                    assert json.loads(reply.choices[0].message.content)["score"] == SCORES[0]
        assert session.unused == [] and session.misses == []  # the judge's recordings: replaced
        session.write_rescored(rescored)
        assert [b["model"] for _, b in live_ep.requests] == ["judge", "judge"]
        assert set(live_ep.authorizations) == {f"Bearer {KEY}"}
    assert live.sent == live.answered == 2 and live.unanswered() == []
    new = load_cassette(rescored)
    assert [(i.rollout, i.seq, i.request["body"]["model"]) for i in new.interactions] == [
        ("plain-r-0", 0, "policy"), ("plain-r-0", 1, "judge"),
        ("plain-r-1", 0, "policy"), ("plain-r-1", 1, "judge")]
    assert KEY not in rescored.read_text()
    # offline, from the new cassette alone: the judge now answers what the live one said
    with netblock.block_network(), hermes_replay.cassette(rescored, "replay", strict=True):
        for rid in ("plain-r-0", "plain-r-1"):
            with hermes_replay.rollout(rid):
                client.chat.completions.create(model="policy", temperature=0, messages=[
                    {"role": "user", "content": f"Say something about {rid}."}])
                reply = client.chat.completions.create(model="judge", temperature=0,
                                                       messages=_judge_prompt(rid))
                assert json.loads(reply.choices[0].message.content)["score"] == SCORES[0]


def test_aiohttp_calls_go_live_rewritten_too(tmp_path: Path) -> None:
    """vLLM/SGLang servers of atroposlib post over aiohttp: a live call made there goes to the
    named endpoint with the named key as well."""
    import asyncio

    import aiohttp

    import hermes_replay

    recorded = tmp_path / "aio.jsonl"
    body = {"model": "judge", "temperature": 0, "messages": _judge_prompt("aiohttp")}

    async def ask(url: str) -> dict:
        async with aiohttp.ClientSession(headers={"Authorization": "Bearer placeholder"}) as s:
            async with s.post(url, json=body) as resp:
                return await resp.json()

    with ScriptedEndpoint(script="generic", seed=0) as ep:
        url = ep.base_url + "/chat/completions"
        with hermes_replay.cassette(recorded, "record"), hermes_replay.rollout("aio-0"):
            asyncio.run(ask(url))
    judge = _RunJudge(per_run=1)
    with ScriptedEndpoint(script=judge.script(), seed=0) as live_ep:
        live = {"patterns": ["model=judge"], "base_url": live_ep.base_url, "api_key_env": "K"}
        with hermes_replay.cassette(recorded, "replay",
                                    live=LiveCalls.build(live, {"K": KEY})) as session, \
                hermes_replay.rollout("aio-0"):
            answer = asyncio.run(ask(url))
        assert json.loads(answer["choices"][0]["message"]["content"])["score"] == SCORES[0]
        assert live_ep.authorizations == [f"Bearer {KEY}"]
        assert session.live_calls is not None and session.live_calls.answered == 1
