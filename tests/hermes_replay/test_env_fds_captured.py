"""What an env writes below Python's ``sys.stdout`` is captured, scrubbed and logged (issue 25,
item 4).

``os.write(1, …)``, ``os.system('echo $KEY')`` and a child process write to file descriptors
1 and 2 directly. They used to reach the terminal unscrubbed (a recording's key in full) and
were missing from the env log. Now a run's fds 1 and 2 go through a pipe into the env log,
scrubbed line by line, while the harness's own progress line still reaches the terminal.
Through ``hermes-replay record`` and ``replay`` (in this process, seen at the fd level with
``capfd``) and through ``run_cassette``, the pytest plugin's path.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import pytest
from _calc_project import write_project

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

KEY = "sk-fdcapture-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
ENV_REL = "environments/loud_env.py"
CASSETTE_REL = "cassettes/loud_env/process.jsonl"
ARGS = ["process", "--env.total_steps", "1", "--env.group_size", "2",
        "--env.data_path_to_save_groups", "data/groups.jsonl"]
MARKERS = ("FD1-MARKER", "FD2-MARKER", "SHELL-MARKER", "CHILD-MARKER")

# An env that writes below Python's streams in setup(), the key among it. The shell and the
# child read the key from the environment, as `os.system('echo $OPENAI_API_KEY')` does. (The
# key is never last on its line: the rules take a capital word on the next line for a key's
# broken-off tail, and whether two writes reach the scrubber in one read is up to the pipe.)
LOUD_ENV = '''\
import os
import subprocess
import sys

from calc_tool_env import CalcEnv


class LoudEnv(CalcEnv):
    name = "loud-env"

    async def setup(self) -> None:
        key = os.environ["LOUD_TEST_API_KEY"]
        os.write(1, f"FD1-MARKER raw write of {key} (end)\\n".encode())
        os.write(2, b"FD2-MARKER no newline at the end")
        os.write(2, b" of the first write\\n")
        os.system("echo SHELL-MARKER $LOUD_TEST_API_KEY")
        subprocess.run([sys.executable, "-c",
                        "import os, sys; sys.stderr.write('CHILD-MARKER '"
                        " + os.environ['LOUD_TEST_API_KEY'] + '\\\\n')"], check=True)
        await super().setup()


if __name__ == "__main__":
    LoudEnv.cli()
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from environments.tools import registry
    from hermes_replay._cli import _runner
    from hermes_replay._terminal.render import Progress

    # the env registers its own tool at import: gone again after the test
    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    # ...so the module that registers it must be imported anew by the next test's run
    monkeypatch.delitem(sys.modules, "calc_tool_env", raising=False)
    monkeypatch.setenv("LOUD_TEST_API_KEY", KEY)
    # a progress line on every event (not every 5 s), so the run shows some while it runs
    monkeypatch.setattr(_runner, "Progress", functools.partial(Progress, interval=0.0))
    write_project(tmp_path)
    (tmp_path / ENV_REL).write_text(LOUD_ENV, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _record() -> int:
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        return main(["record", ENV_REL, "--endpoint", endpoint.base_url, "--model", "scripted",
                     "--server-type", "openai", "--api-key-env", "LOUD_TEST_API_KEY", "--",
                     *ARGS])


def _log_named_in(err: str) -> Path:
    match = re.search(r"environment output: (\S+\.log)", err)
    assert match, err
    return Path(match.group(1))


def _assert_logged_scrubbed(log: Path) -> None:
    text = log.read_text(encoding="utf-8")
    for marker in MARKERS:
        assert marker in text, (marker, text[-2000:])
    assert "FD2-MARKER no newline at the end of the first write" in text  # one line, whole
    assert KEY not in text and KEY[10:] not in text  # scrubbed, not only its prefix


def test_record_logs_the_env_fds_scrubbed_and_keeps_the_terminal_clean(project: Path) -> None:
    """The console script in its own process, its fds 1 and 2 pipes as on a CI runner (under
    pytest, ``sys.stderr`` is not fd 2, so only a real process shows where the progress
    line goes)."""
    import subprocess

    code = ("import functools, sys\n"
            "from hermes_replay._cli import _runner\n"
            "from hermes_replay._terminal.render import Progress\n"
            "_runner.Progress = functools.partial(Progress, interval=0.0)  # a line per event\n"
            "from hermes_replay.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        proc = subprocess.run(
            [sys.executable, "-c", code, "record", ENV_REL, "--endpoint", endpoint.base_url,
             "--model", "scripted", "--server-type", "openai", "--api-key-env",
             "LOUD_TEST_API_KEY", "--", *ARGS],
            capture_output=True, text=True, timeout=300, check=False, cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for marker in MARKERS:
        assert marker not in proc.stdout + proc.stderr, marker
    assert KEY not in proc.stdout + proc.stderr
    assert "2 rollouts recorded" in proc.stdout
    # the progress line still reached the terminal while fd 2 was the env's
    assert re.search(r"\[hermes-replay\] recording loud_env\.py: [12] rollouts",
                     proc.stderr), proc.stderr
    _assert_logged_scrubbed(_log_named_in(proc.stderr))


def test_verbose_record_shows_the_env_fds_scrubbed(project: Path) -> None:
    """``-v`` shows the env's output on the terminal instead of logging it; what the env
    writes below Python (with the key in it) is shown scrubbed, not as written."""
    import subprocess

    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        proc = subprocess.run(
            [sys.executable, "-m", "hermes_replay.cli", "record", ENV_REL, "-v",
             "--endpoint", endpoint.base_url, "--model", "scripted", "--server-type", "openai",
             "--api-key-env", "LOUD_TEST_API_KEY", "--", *ARGS],
            capture_output=True, text=True, timeout=300, check=False, cwd=project)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    for marker in MARKERS:
        assert marker in shown, (marker, shown[-3000:])
    assert KEY not in shown and KEY[10:] not in shown
    assert "2 rollouts recorded" in proc.stdout
    assert "environment output:" not in proc.stderr  # shown, not logged


def test_replay_logs_the_env_fds_and_run_cassette_too(
        project: Path, capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hermes_replay import run_cassette

    assert _record() == 0
    capfd.readouterr()
    assert main(["replay", ENV_REL, "--cassette", CASSETTE_REL, "--", *ARGS]) == 0
    out, err = capfd.readouterr()
    for marker in MARKERS:
        assert marker not in out + err, marker
    assert KEY not in out + err  # a replay knows no key: the rules scrub its shape
    assert "2 rollouts replayed" in out
    _assert_logged_scrubbed(_log_named_in(err))

    result = run_cassette(CASSETTE_REL, out_dir=tmp_path / "out")
    assert len(result.rollouts) == 2
    out, err = capfd.readouterr()
    for marker in MARKERS:
        assert marker not in out + err, marker
    _assert_logged_scrubbed(tmp_path / "out" / "env.log")


def test_the_display_stream_reaches_the_terminal_during_a_capture(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The mechanism alone: inside a capture, fd 2 is the log's, a ``terminal_stream`` over
    fd 2 still writes where fd 2 went before; both are back after."""
    from hermes_replay._runner.fd_capture import captured_fds, terminal_stream

    logged: list[str] = []
    real_stderr = open(2, "w", closefd=False)  # sys.stderr outside pytest
    display = terminal_stream(real_stderr)
    with captured_fds(logged.append):
        os.write(2, b"below python\n")
        display.write("progress line\n")
        display.flush()
        os.system("echo from a shell 1>&2")
    os.write(2, b"after the capture\n")
    _, err = capfd.readouterr()
    assert err == "progress line\nafter the capture\n"
    assert "".join(logged) == "below python\nfrom a shell\n"


def test_a_child_left_running_cannot_hold_the_run_open(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A background process that inherited fd 1 keeps the pipe open after the run: the
    capture still ends (within its drain limit), and the fds are the terminal's again."""
    import subprocess
    import time

    from hermes_replay._runner.fd_capture import captured_fds

    logged: list[str] = []
    start = time.monotonic()
    with captured_fds(logged.append):
        child = subprocess.Popen(["sh", "-c", "echo started; sleep 30"])
    try:
        assert time.monotonic() - start < 10
        os.write(1, b"terminal again\n")
        out, _ = capfd.readouterr()
        assert out == "terminal again\n"
        assert "".join(logged) == "started\n"
    finally:
        child.kill()
        child.wait()
