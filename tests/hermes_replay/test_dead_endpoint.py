"""Recording against a dead endpoint fails fast, names it, and leaves nothing behind (issue 25,
item 25).

Before the fix, a recording against a port that refuses connections ran every rollout through
every retry layer (77 s and 216 failed attempts for the probe; 108 for the calc env here), then
printed "4 rollouts recorded · 0 interactions" and left ``data/groups.jsonl``/``.html`` in the
project. A port that accepts and never answers hung for the client's timeout (20 minutes in
atroposlib's default) times its retries. Through ``hermes-replay record`` with the calc env, in
this process, against real sockets on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from _calc_project import ENV_REL, PROCESS_ARGS, write_project
from _ctrl_c import ctrl_c_ignored_in_children
from _loopback_app import LoopbackApp
from aiohttp import web

from hermes_replay._errors import RecordingFailed
from hermes_replay._runner.dead_endpoint import DEFAULT_MAX_UNANSWERED
from hermes_replay.cli import main

# a stopped recording ends the env's coroutines cleanly: one that the garbage collector closed
# after asyncio.run abandoned it printed "exception ignored" (a rollout scope reset in another
# context) under the run's real error
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from environments.tools import registry

    # the env registers its own tool at import: gone again after the test
    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    monkeypatch.delitem(sys.modules, "calc_tool_env", raising=False)
    monkeypatch.chdir(write_project(tmp_path))
    return tmp_path


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound and never listening, and held for
    the test (a port bound and closed again could be taken by another program's server on a
    busy machine, and then answer)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never sends a byte back."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _record(url: str, *flags: str) -> int:
    return main(["record", ENV_REL, "--endpoint", url, "--model", "scripted", "--server-type",
                 "openai", *flags, "--", *PROCESS_ARGS])


def test_refused_connections_stop_the_recording_at_once(project: Path, capsys,
                                                       refusing_port: int) -> None:
    earlier = project / "data" / "groups.jsonl"  # an earlier run's output: not this run's
    earlier.parent.mkdir()
    earlier.write_text('{"earlier": true}\n', encoding="utf-8")
    url = f"http://127.0.0.1:{refusing_port}/v1"
    assert _record(url) == 1
    out, _ = capsys.readouterr()
    assert f"error: {url} did not answer: " in out, out
    assert "could not connect (ConnectError)" in out
    assert "next step: check that the server is running and that --endpoint names it" in out
    assert "0 rollouts recorded" in out  # not "4 rollouts recorded · 0 interactions"
    assert not (project / "cassettes" / "calc_tool_env" / "process.jsonl").exists()
    # nothing was recorded, so no empty journal is left in cassettes/ for verify to flag
    assert not (project / "cassettes" / "calc_tool_env" / "process.jsonl.partial").exists()
    # this run's groups_1.jsonl/.html are gone; the earlier file is untouched
    assert sorted(p.name for p in earlier.parent.iterdir()) == ["groups.jsonl"]
    assert earlier.read_text(encoding="utf-8") == '{"earlier": true}\n'


@pytest.mark.parametrize("earlier_run", [True, False], ids=["earlier-run", "new-folder"])
def test_a_failed_evaluate_recording_puts_the_eval_folder_back(project: Path,
                                                               earlier_run: bool,
                                                               refusing_port: int) -> None:
    # atroposlib's evaluate writes evaluate_config.yaml before anything runs (over an earlier
    # run's); a failed recording must neither leave it as if it were a run's, nor lose that one
    evals = project / "evals"
    earlier = {"evaluate_config.yaml": "env:\n  earlier: true\n",
               "metrics.json": '{"eval/mean_reward": 0.25}', "notes.txt": "mine\n"}
    if earlier_run:
        evals.mkdir()
        for name, text in earlier.items():
            (evals / name).write_text(text, encoding="utf-8")
    url = f"http://127.0.0.1:{refusing_port}/v1"
    code = main(["record", ENV_REL, "--endpoint", url, "--model", "scripted", "--server-type",
                 "openai", "--cassette", "cassettes/calc_tool_env/evaluate.jsonl", "--",
                 "evaluate", "--env.eval_size", "2", "--env.data_dir_to_save_evals", "evals"])
    assert code == 1
    if earlier_run:
        assert {p.name: p.read_text(encoding="utf-8") for p in evals.iterdir()} == earlier
    else:
        assert not evals.exists(), sorted(p.name for p in evals.rglob("*"))


def test_a_refused_recording_makes_few_attempts(project: Path, refusing_port: int) -> None:
    """The count, through the library's runner (what ``run_cassette`` uses too): a handful of
    failed attempts, where every retry layer used to run to its end (108 here)."""
    from hermes_replay._runner.run import run_env

    argv = [*PROCESS_ARGS, "--openai.base_url", f"http://127.0.0.1:{refusing_port}/v1",
            "--openai.model_name", "scripted", "--openai.api_key", "x",
            "--openai.server_type", "openai", "--openai.health_check", "false"]
    result = run_env((project / ENV_REL).resolve(), argv,
                     cassette=project / "c.jsonl", mode="record",
                     log_path=project / "env.log")
    assert isinstance(result.error, RecordingFailed), result.error
    assert f"127.0.0.1:{refusing_port}/v1 did not answer" in str(result.error)
    assert result.summary is not None
    # the guard trips at the fifth refused request itself (its poke), not at a later tick
    assert result.summary.failed_attempts == DEFAULT_MAX_UNANSWERED, \
        result.summary.failed_attempts
    assert result.summary.recorded == 0


def test_a_recording_started_as_a_background_job_stops_at_once_too(project: Path,
                                                                  refusing_port: int) -> None:
    """``hermes-replay record … &`` in a script (or nohup, or a CI runner) starts with SIGINT
    ignored; the guard used to stand down there and this ran all 108 attempts."""
    url = f"http://127.0.0.1:{refusing_port}/v1"
    with ctrl_c_ignored_in_children():
        proc = subprocess.Popen(
            [sys.executable, "-m", "hermes_replay.cli", "record", ENV_REL, "--endpoint", url,
             "--model", "scripted", "--server-type", "openai", "--", *PROCESS_ARGS],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL)
    stdout, stderr = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"error: {url} did not answer: " in done.stdout, done.stdout[-2000:]
    assert f"{DEFAULT_MAX_UNANSWERED} requests in a row could not connect" in done.stdout


def test_an_endpoint_that_never_answers_is_stopped_after_the_first_answer_timeout(
        project: Path, silent_port: int, capsys) -> None:
    url = f"http://127.0.0.1:{silent_port}/v1"
    assert _record(url, "--first-answer-timeout", "2") == 1
    out, _ = capsys.readouterr()
    assert f"error: {url} sent no answer in 2 s (the first request is still waiting)" in out
    assert "pass --first-answer-timeout SECONDS" in out
    assert "0 rollouts recorded" in out
    assert not (project / "data" / "groups.jsonl").exists()
    assert not (project / "data" / "groups.html").exists()


class _SlowStream(LoopbackApp):
    """Sends a streamed reply's headers at once, then its chunks over ``seconds``: a model
    writing a long answer, not a dead one."""

    def __init__(self, seconds: float, chunks: int = 5) -> None:
        super().__init__()
        self.seconds, self.chunks = seconds, chunks

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._stream)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(self.chunks):
            await asyncio.sleep(self.seconds / self.chunks)
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": f"w{i} "},
                                  "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def test_a_streamed_reply_longer_than_the_first_answer_timeout_is_recorded(
        tmp_path: Path) -> None:
    # the deadline is for an endpoint that never answers; a stream that has begun is an
    # answer, however long it runs (before the fix, this recording was stopped at 1 s)
    import hermes_replay
    from hermes_replay._runner.dead_endpoint import dead_endpoint_guard

    path = tmp_path / "c.jsonl"
    with _SlowStream(seconds=2.5) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        with hermes_replay.cassette(path, "record") as session, \
                dead_endpoint_guard(session, first_answer_timeout=1), \
                hermes_replay.rollout("r0"):
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "write a lot"}], stream=True)
            text = "".join(part.choices[0].delta.content or "" for part in stream)
    assert text == "w0 w1 w2 w3 w4 "
    assert session.live.answers == 1  # counted once: at its headers, not again at its end
    with hermes_replay.cassette(path, "replay", strict=True):
        with hermes_replay.rollout("r0"):
            again = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "write a lot"}], stream=True)
            assert "".join(p.choices[0].delta.content or "" for p in again) == text
