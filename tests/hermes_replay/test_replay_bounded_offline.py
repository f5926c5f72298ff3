"""Replay is bounded and offline, and runs only environment files.

- the CLI refuses non-loopback connections *and DNS lookups* like the plugin (opt-out
  ``--allow-network``);
- atroposlib's health check, on in the recorded argv or in the env's own config, never
  makes a replay wait: the argv turns it off and a ping that still comes is answered;
- a replay that keeps missing stops with ``ReplayStalled`` instead of running forever;
- a cassette can make replay run only a file that defines an environment class (read from
  its source before anything is imported), never one under ``cassettes/``.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import openai
import pytest
from test_cli_record_replay import TINY_ENV

import hermes_replay
from hermes_replay._runner.env_guard import NotAnEnvFile, check_env_file, env_classes
from hermes_replay._runner.netblock import NetworkBlocked, block_network
from hermes_replay._runner.stall import ReplayStalled, stall_guard
from hermes_replay._runner.watchdog import can_interrupt_main
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint


def test_dns_of_a_remote_name_is_refused_before_any_lookup() -> None:
    with block_network():
        with pytest.raises(NetworkBlocked, match=r"huggingface\.co"):
            socket.getaddrinfo("huggingface.co", 443)
        assert socket.getaddrinfo("localhost", 80)  # loopback names still resolve
        assert socket.getaddrinfo("127.0.0.1", 80)
    assert socket.getaddrinfo.__module__ == "socket"  # unpatched after the block


# -- the CLI ----------------------------------------------------------------------------------

RESOLVING_ENV = TINY_ENV.replace('    print("tiny env done")', '''    import socket
    try:
        socket.getaddrinfo("huggingface.co", 443)
        print("RESOLVED huggingface.co")
    except OSError as exc:
        print("LOOKUP FAILED:", exc)
        if "hermes-replay blocked" in str(exc):
            raise
    print("tiny env done")''')


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "tiny_env.py").write_text(TINY_ENV, encoding="utf-8")
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        code = main(["record", "envs/tiny_env.py", "--endpoint", ep.base_url, "--model",
                     "scripted", "--", "process", "--env.total_steps", "2"])
    assert code == 0
    return tmp_path


def test_cli_replay_blocks_dns_and_connections_unless_allowed(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "envs" / "tiny_env.py").write_text(RESOLVING_ENV, encoding="utf-8")
    capsys.readouterr()
    code = main(["replay", "cassettes/tiny_env/process.jsonl", "--out", "out", "-v"])
    captured = capsys.readouterr()
    assert code == 1
    assert "hermes-replay blocked a connection to ('huggingface.co', 443)" in \
        captured.out + captured.err
    code = main(["replay", "cassettes/tiny_env/process.jsonl", "--out", "out2", "-v",
                 "--allow-network"])
    captured = capsys.readouterr()
    assert "hermes-replay blocked" not in captured.out + captured.err  # the opt-out works
    assert "tiny env done" in captured.out + captured.err


def test_a_header_argv_that_turns_the_health_check_on_does_not_hang(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
    lines = cassette.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["command"] += ["--openai.health_check", "true"]
    cassette.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    code = main(["replay", str(cassette), "--out", "out", "--strict"])
    assert code == 0, capsys.readouterr()
    result = json.loads((project / "out" / "process" / "result.json").read_text())
    assert "'--openai.health_check', 'false'" in str(result.get("command")) or \
        result["command"][-2:] == ["--openai.health_check", "false"]


async def test_atroposlib_health_pings_are_answered_in_replay(tmp_path: Path) -> None:
    """The real OpenAIServer with health_check=True (as an env's config_init may set it):
    its pings were never recorded, yet the replay runs and nothing misses."""
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager

    path = tmp_path / "c.jsonl"

    async def run(base: str, health_check: bool) -> str:
        manager = ServerManager([APIServerConfig(
            model_name="m", base_url=base, api_key="x-offline", server_type="openai",
            health_check=health_check, timeout=30)])
        with hermes_replay.rollout("train-x-0-0"):
            done = await manager.chat_completion(
                messages=[{"role": "user", "content": "List the files."}], n=1)
        return done.choices[0].message.content or ""

    with ScriptedEndpoint(script="generic", seed=3) as ep:
        base = ep.base_url
        async with hermes_replay.cassette(path, "record"):
            recorded = await run(base, health_check=False)
    async with hermes_replay.cassette(path, "replay", strict=True) as session:
        assert await run(base, health_check=True) == recorded
    assert session.misses == [] and session.miss_events == 0


def test_a_replay_that_keeps_missing_stops_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        base = ep.base_url
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r0"):
            openai.OpenAI(base_url=base, api_key="x", max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "recorded"}])
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    attempts = 0
    # the guard stands down under another owner of SIGINT (see stall_guard); say so if an
    # earlier test in this process left one installed. (A serial CI run once ran all 10,000
    # attempts below unstopped: it was started as a background job, with SIGINT ignored, where
    # the guard used to stand down too; it no longer does.)
    assert can_interrupt_main(), \
        f"SIGINT handler is {signal.getsignal(signal.SIGINT)!r}: stall_guard is off"
    with pytest.raises(ReplayStalled) as info:
        with hermes_replay.cassette(path, "replay") as session, \
                stall_guard(session, max_misses=5), hermes_replay.rollout("r0"):
            while attempts < 10_000:  # an env that retries a failed request forever
                attempts += 1
                try:
                    client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "never recorded"}])
                except (openai.NotFoundError, hermes_replay.RequestNotRecorded):
                    pass
    message = str(info.value)
    assert "requests in a row had no recording" in message and str(path) in message
    assert "the first: rollout 'r0', turn 1" in message  # a recorded rollout is named
    # the count trips at the fifth miss itself, not at a watchdog tick: a tick can come seconds
    # late (CPython starves the watchdog thread of the GIL while this loop runs: the SDK calls
    # os.urandom for every request), and CI once saw 10,000 attempts unstopped
    assert attempts == 5



def test_the_stall_guards_deadline_trips_while_the_main_thread_holds_the_session_lock(
        tmp_path: Path) -> None:
    # A replay that keeps missing holds the session's lock for most of every miss and retakes
    # it at once; a watchdog check that waited on that lock starved. Here the main thread holds
    # it outright after one miss: the idle deadline must still stop the run, and a guard that
    # needs the lock never trips, so the sleep loop below ends normally.
    path = tmp_path / "c.jsonl"
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        with hermes_replay.cassette(path, "record"), hermes_replay.rollout("r0"):
            openai.OpenAI(base_url=ep.base_url, api_key="x", max_retries=0) \
                .chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        base = ep.base_url
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    assert can_interrupt_main(), signal.getsignal(signal.SIGINT)
    slept = 0
    with pytest.raises(ReplayStalled, match="no request was answered") as info:
        with hermes_replay.cassette(path, "replay") as session, \
                stall_guard(session, max_misses=100, idle_seconds=1), \
                hermes_replay.rollout("r0"):
            with pytest.raises(hermes_replay.RequestNotRecorded):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "b"}])
            with session._lock:
                while slept < 100:  # 10 s: the deadline is 1 s
                    time.sleep(0.1)
                    slept += 1
    assert slept < 100
    assert "the first: " in str(info.value) and "r0" in str(info.value)  # named after the stop

# -- only environment files run ---------------------------------------------------------------

def test_env_classes_are_found_by_reading_source(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "base.py").write_text(
        "from environments.hermes_base_env import HermesAgentBaseEnv as H\n"
        "class MyBase(H):\n    pass\n")
    env = tmp_path / "my_env.py"
    env.write_text("import os\nos.system('touch RAN')\nfrom pkg.base import MyBase\n"
                   "class Later(Mine):\n    pass\nclass Mine(MyBase):\n    pass\n")
    assert env_classes(env, roots=[tmp_path]) == ["Later", "Mine"]  # source order
    two = tmp_path / "two_env.py"  # two names from one module: the module is read once
    two.write_text("from environments.multi_signal_env import MultiSignalEnvConfig, "
                   "MultiSignalEnv\nclass C(MultiSignalEnvConfig):\n    pass\n"
                   "class E(MultiSignalEnv):\n    pass\n")
    assert env_classes(two, roots=[tmp_path]) == ["E"]
    assert not (tmp_path / "RAN").exists()  # read, never run
    runner = tmp_path / "run_env.py"  # imports an env class and runs its CLI
    runner.write_text("from environments.terminal_test_env import TerminalTestEnv\n"
                      "from argparse import ArgumentParser\n"
                      "if __name__ == '__main__':\n    TerminalTestEnv.cli()\n")
    assert env_classes(runner, roots=[tmp_path]) == ["TerminalTestEnv"]
    fake = tmp_path / "fake.py"  # .cli() of something that is no environment
    fake.write_text("from argparse import ArgumentParser as Tool\nTool.cli()\n")
    assert env_classes(fake, roots=[tmp_path]) == []
    script = tmp_path / "build.py"
    script.write_text("class Builder(object):\n    pass\nprint('side effect')\n")
    with pytest.raises(NotAnEnvFile, match="defines no environment class"):
        check_env_file(script, tmp_path)
    dropped = tmp_path / "cassettes" / "x" / "my_env.py"
    dropped.parent.mkdir(parents=True)
    dropped.write_text(env.read_text())
    with pytest.raises(NotAnEnvFile, match="cassettes/ folder"):
        check_env_file(dropped, tmp_path)


def test_an_edited_file_is_read_again_even_at_the_same_size_and_time(tmp_path: Path) -> None:
    """Parsed files are kept across replays in one process (``watch``, a worker's corpus);
    a save that keeps the size and the modification time still changes the verdict."""
    import os

    env = tmp_path / "my_env.py"
    env.write_text("from environments.multi_signal_env import MultiSignalEnv\n"
                   "class Mine(MultiSignalEnv):\n    pass\n")
    assert env_classes(env, roots=[tmp_path]) == ["Mine"]
    stat = env.stat()
    env.write_text("from environments.multi_signal_env import MultiSignalEnv\n"
                   "class Mine(MultiSignalEnvX):\n    pass\n"[:stat.st_size])
    os.utime(env, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert env.stat().st_size == stat.st_size and env.stat().st_mtime_ns == stat.st_mtime_ns
    assert env_classes(env, roots=[tmp_path]) == []
    with pytest.raises(NotAnEnvFile, match="defines no environment class"):
        check_env_file(env, tmp_path)


@pytest.mark.parametrize("target", ["scripts/build_tokenizer.py", "cassettes/tiny_env/evil.py"])
def test_a_cassette_cannot_make_replay_run_a_script(project: Path, target: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    script = project / target
    script.parent.mkdir(parents=True, exist_ok=True)
    body = "open('RAN', 'w').write('ran')\n"
    if "evil" in target:  # even a real env class is refused under cassettes/
        body = TINY_ENV + body
    script.write_text(body, encoding="utf-8")
    cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
    lines = cassette.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["env_file"] = target
    cassette.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["replay", str(cassette), "--out", "out"])
    captured = capsys.readouterr()
    assert code == 1
    assert target in captured.err and ("no environment class" in captured.err
                                       or "holds cassettes" in captured.err)
    assert not (project / "RAN").exists()
