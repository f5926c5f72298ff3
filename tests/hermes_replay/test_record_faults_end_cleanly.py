"""Faults while recording end cleanly: one message naming the file and the cause, exit 1 (or
128 + signal), no traceback, the previous cassette byte for byte, no sandbox folder left.

Real faults, in a real ``hermes-replay record`` subprocess: a full disk is the kernel's file
size limit (``RLIMIT_FSIZE``: every write past it fails with ``EFBIG``, as a full disk fails
with ``ENOSPC``); another ``OSError`` is a directory where the final write's temp file goes;
SIGTERM and SIGINT are sent to the process mid-run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _ctrl_c import ctrl_c_reaches_children
from _limited_writes import limited_code, limited_env, truncated_bytecode
from test_cli_record_replay import TINY_ENV

from hermes_replay.scripted_endpoint import ScriptedEndpoint

# one worker runs the module: its good recording (a record subprocess) is made once, not per
# worker
pytestmark = pytest.mark.xdist_group("test_record_faults_end_cleanly")

CLI = "from hermes_replay.cli import main\nsys.exit(main(sys.argv[1:]))\n"
# The final rewrite's temp file is .<name>.<pid>.tmp; a directory there makes it fail.
BLOCKED_FINAL = TINY_ENV.replace(
    '    print("tiny env done")',
    '    os.makedirs(f"cassettes/tiny_env/.process.jsonl.{os.getpid()}.tmp", exist_ok=True)\n'
    '    print("tiny env done")')
# Slow, with a sandbox of the real local backend, so a signal lands mid-run.
SLOW_WITH_SANDBOX = TINY_ENV.replace(
    '    steps = int(flag("--env.total_steps", "2"))',
    '    steps = int(flag("--env.total_steps", "2"))\n'
    '    from environments.tools.sandbox.local import sandbox_root\n'
    '    print("SANDBOX", sandbox_root(), flush=True)')


def _make_project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    (root / "envs").mkdir()
    (root / "envs" / "tiny_env.py").write_text(TINY_ENV, encoding="utf-8")
    (root / "tmp").mkdir()
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _make_project(tmp_path)


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(project / "tmp"), "PYTHONUNBUFFERED": "1"}


def _record(project: Path, base_url: str, *, limit: int | None = None, steps: int = 2,
            wait: bool = True) -> subprocess.Popen[str]:
    cli = ["record", "envs/tiny_env.py", "--endpoint", base_url, "--model", "scripted", "--",
           "process", "--env.total_steps", str(steps)]
    if limit is not None:  # a full disk (see _limited_writes for why it writes no bytecode)
        argv, env = [sys.executable, "-c", limited_code(limit, CLI), *cli], limited_env(
            _env(project))
    else:
        argv, env = [sys.executable, "-m", "hermes_replay.cli", *cli], _env(project)
    with ctrl_c_reaches_children():  # some tests interrupt it
        proc = subprocess.Popen(argv, cwd=project, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if wait:
        proc.wait(timeout=300)
    return proc


@pytest.fixture(scope="module")
def _good_cassettes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One good recording for the module (a real ``record`` subprocess, ~8 s): each test gets
    a copy of its cassettes folder rather than recording its own."""
    project = _make_project(tmp_path_factory.mktemp("good-recording"))
    with ScriptedEndpoint(script="generic", seed=0, latency=(0.2, 0.2)) as ep:
        proc = _record(project, ep.base_url)
        assert proc.returncode == 0, proc.stderr.read()
    return project / "cassettes"


@pytest.fixture
def recorded(project: Path, _good_cassettes: Path) -> tuple[Path, bytes, ScriptedEndpoint]:
    """A good cassette already there (what every fault must leave alone)."""
    shutil.copytree(_good_cassettes, project / "cassettes")
    with ScriptedEndpoint(script="generic", seed=0, latency=(0.2, 0.2)) as ep:
        cassette = project / "cassettes" / "tiny_env" / "process.jsonl"
        yield cassette, cassette.read_bytes(), ep


def _env_log(proc: subprocess.Popen[str]) -> Path:
    """The env log a quiet ``record`` names on its second stderr line (the env's own output
    goes there, not to the terminal)."""
    assert proc.stderr is not None
    for _ in range(5):
        line = proc.stderr.readline()
        if "environment output: " in line:
            return Path(line.split("environment output: ")[1].split()[0])
    raise AssertionError("record did not name its env log")


def _one_clean_message(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "check the endpoint" not in stderr, stderr  # not blamed on the endpoint


@pytest.mark.parametrize("fraction", [0.3, 1.3])  # early in the journal, and late
def test_disk_full_ends_with_one_message_and_the_old_cassette(recorded, project: Path,
                                                              fraction: float) -> None:
    cassette, before, ep = recorded
    started = time.time()
    proc = _record(project, ep.base_url, limit=int(len(before) * fraction), steps=4)
    stderr = proc.stderr.read()
    assert not truncated_bytecode(started)  # the full disk harmed no other interpreter
    assert proc.returncode == 1, stderr
    _one_clean_message(stderr)
    assert "cannot write the recording: File too large" in stderr, stderr
    assert "process.jsonl" in stderr  # the file is named
    assert cassette.read_bytes() == before


def test_another_oserror_in_the_final_write_keeps_the_old_cassette(recorded,
                                                                   project: Path) -> None:
    cassette, before, ep = recorded
    (project / "envs" / "tiny_env.py").write_text(BLOCKED_FINAL, encoding="utf-8")
    proc = _record(project, ep.base_url)
    stderr = proc.stderr.read()
    assert proc.returncode == 1, stderr
    _one_clean_message(stderr)
    assert f"{Path('cassettes/tiny_env/process.jsonl')}: cannot write the recording" in stderr
    assert "directory" in stderr.lower()
    assert cassette.read_bytes() == before
    assert (project / "cassettes" / "tiny_env" / "process.jsonl.partial").is_file()


@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                   (signal.SIGINT, 130, "interrupted")])
def test_a_signal_mid_run_ends_with_a_message_and_removes_sandboxes(
        recorded, project: Path, sig: int, code: int, said: str) -> None:
    cassette, before, ep = recorded
    (project / "envs" / "tiny_env.py").write_text(SLOW_WITH_SANDBOX, encoding="utf-8")
    proc = _record(project, ep.base_url, steps=50, wait=False)
    assert proc.stderr is not None
    log = _env_log(proc)
    line = ""
    deadline = time.monotonic() + 120
    while not line and time.monotonic() < deadline:  # the env started and made its sandbox
        line = next((x for x in log.read_text().splitlines() if x.startswith("SANDBOX")), "")
        time.sleep(0.05)
    assert line, log.read_text()
    sandbox = Path(line.split()[1])
    assert sandbox.is_dir()
    partial = cassette.with_name("process.jsonl.partial")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and partial.stat().st_size < 1000:
        time.sleep(0.1)  # at least one interaction recorded: really mid-run
    proc.send_signal(sig)
    proc.wait(timeout=60)
    stderr = proc.stderr.read()
    assert proc.returncode == code, stderr
    _one_clean_message(stderr)
    assert f"hermes-replay record: {said}; nothing was overwritten" in stderr, stderr
    assert cassette.read_bytes() == before
    assert not sandbox.exists()
    assert not list((project / "tmp").glob(f"hermes-sandboxes-{proc.pid}-*"))


def test_sandbox_roots_of_dead_processes_are_removed_at_the_next_start(tmp_path: Path) -> None:
    from environments.tools.sandbox.local import remove_stale_roots

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"hermes-sandboxes-{dead.pid}-abc123"
    (stale / "task-1" / "work").mkdir(parents=True)
    (stale / "task-1" / "work" / "out.txt").write_text("left by a killed run")
    os.chmod(stale / "task-1" / "work", 0o500)  # as an agent's chmod -w would
    alive = tmp_path / f"hermes-sandboxes-{os.getppid()}-def456"
    alive.mkdir()
    other = tmp_path / "hermes-sandboxes-notapid"
    other.mkdir()
    assert remove_stale_roots(str(tmp_path)) == [str(stale)]
    assert not stale.exists() and alive.is_dir() and other.is_dir()
    # and sandbox_root() does it when a process makes its own root
    stale.mkdir()
    out = subprocess.run([sys.executable, "-c", "from environments.tools.sandbox.local import "
                          "sandbox_root; print(sandbox_root())"], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=120, check=True)
    assert not stale.exists() and out.stdout.strip().startswith(str(tmp_path))
