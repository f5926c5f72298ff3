"""The local sandbox backend: isolation per task id, timeouts, output cap, real cleanup.

These tests pin the folder-and-process-group sandbox (``HERMES_SANDBOX=none``): its host paths,
pids and background jobs are what they inspect. The same backend inside bubblewrap is proved
in ``test_sandbox_isolation.py``.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid

import pytest

from environments.tools.sandbox import (
    BackendNotAvailableError,
    LocalSandbox,
    active_sandboxes,
    cleanup_sandbox,
    get_sandbox,
    sandbox_root,
)
from environments.tools.sandbox._warden import (
    QUOTA_CHECK_MAX_S,
    QUOTA_CHECK_MIN_S,
    next_quota_check,
)
from environments.tools.sandbox.local import group_members


@pytest.fixture(autouse=True)
def _without_kernel_isolation(monkeypatch):
    monkeypatch.setenv("HERMES_SANDBOX", "none")


@pytest.fixture
def task_id():
    tid = f"test-sandbox-{uuid.uuid4().hex[:8]}"
    yield tid
    cleanup_sandbox(tid)


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            raw = fh.read()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2 :].split()[0] != "Z"


def _wait_gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")


def test_run_in_private_dir_with_home_and_tmpdir_inside(task_id):
    box = get_sandbox(task_id)
    result = box.run('pwd; echo "$HOME"; echo "$TMPDIR"')
    assert result.exit_code == 0
    assert result.output == "/workspace\n/workspace\n/workspace/.tmp\n"  # the agent's view
    script = "import os; print(os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'])"
    box.run(f'python -c "{script}" > env.txt')
    with open(os.path.join(box.work_dir, "env.txt")) as fh:  # the real values, on the host
        cwd, home, tmp = fh.read().split()
    assert os.path.realpath(cwd) == os.path.realpath(box.work_dir)
    assert home == box.work_dir
    assert tmp.startswith(box.work_dir) and os.path.isdir(tmp)
    assert box.base_dir.startswith(sandbox_root())


def test_exit_codes_are_reported(task_id):
    box = get_sandbox(task_id)
    assert box.run("exit 3").exit_code == 3
    assert box.run("kill -9 $$").exit_code == 137  # signal 9, reported like a shell


def test_host_secrets_do_not_reach_the_sandbox(task_id, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    out = get_sandbox(task_id).run('echo "${OPENAI_API_KEY:-unset}"').output
    assert out.strip() == "unset"


def test_two_task_ids_never_share_a_directory():
    a, b = "test-sandbox-a/b", "test-sandbox-a_b"  # same text once sanitised
    try:
        box_a, box_b = get_sandbox(a), get_sandbox(b)
        assert box_a.work_dir != box_b.work_dir
        box_a.write_file("f.txt", "from a")
        assert not os.path.exists(os.path.join(box_b.work_dir, "f.txt"))
        assert "No such file" in box_b.run("cat f.txt").output
    finally:
        cleanup_sandbox(a)
        cleanup_sandbox(b)


def test_get_sandbox_caches_per_task_and_cleanup_starts_fresh(task_id):
    box = get_sandbox(task_id)
    assert get_sandbox(task_id) is box
    assert task_id in active_sandboxes()
    box.write_file("keep.txt", "x")
    assert cleanup_sandbox(task_id) is True
    assert task_id not in active_sandboxes()
    assert not os.path.exists(box.base_dir)
    fresh = get_sandbox(task_id)
    assert fresh is not box
    assert fresh.run("ls").output == ""
    with pytest.raises(RuntimeError, match="cleaned up"):
        box.run("true")


@needs_proc
def test_cleanup_kills_background_processes_and_removes_directory(task_id):
    box = get_sandbox(task_id)
    started = time.monotonic()
    result = box.run("nohup sleep 1000 >/dev/null 2>&1 & echo $!")
    # output goes to a file, not a pipe, so the background job cannot hold the call open
    assert time.monotonic() - started < 5
    pid = int(result.output.strip())
    pgid = os.getpgid(pid)
    assert _alive(pid)
    assert pid in box.processes()

    cleanup_sandbox(task_id)

    assert _wait_gone(pid)
    assert group_members(pgid) == []
    assert not os.path.exists(box.base_dir)


@needs_proc
@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
def test_cleanup_kills_processes_that_left_the_process_group(task_id):
    box = get_sandbox(task_id)
    pid = int(box.run("setsid sleep 1000 >/dev/null 2>&1 & echo $!").output.strip())
    time.sleep(0.1)  # let setsid run
    assert _alive(pid)
    assert os.getpgid(pid) not in box._pgids  # it really escaped the tracked groups
    cleanup_sandbox(task_id)
    assert _wait_gone(pid)


@needs_proc
def test_timeout_kills_the_whole_process_group_including_grandchildren(task_id):
    box = get_sandbox(task_id)
    started = time.monotonic()
    result = box.run("bash -c 'sleep 1000 & echo $! > grandchild.pid; wait' & wait", timeout=0.5)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.exit_code == 124
    assert "timed out after 0.5s" in result.output
    grandchild = int(box.read_file("grandchild.pid"))
    assert _wait_gone(grandchild)


def test_default_timeout_is_used_when_none_given(task_id):
    box = get_sandbox(task_id)
    box.default_timeout = 0.3
    assert box.run("sleep 5").exit_code == 124


def test_output_cap_keeps_head_and_tail_with_a_marker(task_id):
    box = get_sandbox(task_id)
    box.max_output_chars = 100
    big = box.run("seq 1 10000")  # ~49 KB: the "never load it all" path
    assert big.truncated
    assert big.output.startswith("1\n2\n3\n")
    assert big.output.rstrip().endswith("9999\n10000")
    assert "output truncated" in big.output
    assert len(big.output) < 200

    small = box.run("python -c \"print('x' * 150, end='')\"")  # just over the cap
    assert small.truncated
    assert "50 characters omitted" in small.output
    assert small.output.count("x") == 100

    fits = box.run("echo ok")
    assert not fits.truncated and fits.output == "ok\n"


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../b", "/"])
def test_paths_outside_the_sandbox_are_refused(task_id, path):
    box = get_sandbox(task_id)
    with pytest.raises(PermissionError, match="outside the sandbox"):
        box.resolve(path)
    with pytest.raises(PermissionError):
        box.write_file(path, "nope")


def test_symlink_pointing_out_is_refused(task_id, tmp_path):
    box = get_sandbox(task_id)
    (tmp_path / "secret.txt").write_text("host secret")
    os.symlink(tmp_path, os.path.join(box.work_dir, "link"))
    with pytest.raises(PermissionError):
        box.read_file("link/secret.txt")


def test_absolute_path_inside_the_sandbox_is_allowed(task_id):
    box = get_sandbox(task_id)
    box.write_file(os.path.join(box.work_dir, "sub", "a.txt"), "hi")
    assert box.read_file("sub/a.txt") == "hi"


def test_upload_and_download_round_trip(task_id, tmp_path):
    box = get_sandbox(task_id)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("alpha")
    box.upload(str(src / "a.txt"), "in/a.txt")
    box.upload(str(src), "tree")
    assert box.run("cat in/a.txt tree/a.txt").output == "alphaalpha"
    box.download("in/a.txt", str(tmp_path / "out" / "a.txt"))
    assert (tmp_path / "out" / "a.txt").read_text() == "alpha"


def test_docker_backend_says_it_is_not_available():
    with pytest.raises(BackendNotAvailableError, match="not available"):
        get_sandbox("test-sandbox-docker", backend="docker")
    assert "test-sandbox-docker" not in active_sandboxes()
    assert issubclass(BackendNotAvailableError, NotImplementedError)


def test_unknown_backend_and_backend_mismatch_are_errors(task_id):
    with pytest.raises(ValueError, match="available: bwrap, docker, local"):
        get_sandbox("test-sandbox-x", backend="kubernetes")
    get_sandbox(task_id, backend="local")
    with pytest.raises(ValueError, match="already has a 'local' sandbox"):
        get_sandbox(task_id, backend="docker")


def test_local_sandbox_is_the_default_backend(task_id):
    assert isinstance(get_sandbox(task_id), LocalSandbox)


@needs_proc
def test_process_without_the_marker_is_still_killed_through_its_group(task_id):
    box = get_sandbox(task_id)
    pid = int(box.run("env -i /bin/sleep 1000 >/dev/null 2>&1 & echo $!").output)
    assert _alive(pid)
    cleanup_sandbox(task_id)
    assert _wait_gone(pid)


def test_empty_process_groups_are_forgotten(task_id):
    """A dead group's number can be reused by a stranger; cleanup must not signal it."""
    box = get_sandbox(task_id)
    box.run("true")
    assert box._pgids == set()
    box.run("sleep 1000 >/dev/null 2>&1 &")
    assert len(box._pgids) == 1


def test_agent_sees_its_directory_as_workspace(task_id):
    """Host paths hold a pid and random letters; they must not reach the model (replay)."""
    box = get_sandbox(task_id)
    out = box.run(
        "echo hi > /workspace/a.txt; cat /workspace/a.txt; echo /workspaces /x/workspace;"
        "printf 'print(1/0)' > crash.py; python crash.py"
    ).output
    assert out.startswith("hi\n/workspaces /x/workspace\n")  # longer names are not paths
    assert 'File "/workspace/crash.py"' in out
    assert sandbox_root() not in out
    assert box.read_file("/workspace/a.txt") == "hi\n"
    assert box.resolve("/workspace") == os.path.realpath(box.work_dir)
    box.write_file("sub/x.txt", "x")
    assert box.run("pwd", cwd="/workspace/sub").output == "/workspace/sub\n"
    with pytest.raises(PermissionError) as info:
        box.resolve("/workspace/../etc")
    assert sandbox_root() not in str(info.value)


def test_agent_cannot_break_the_sandbox_by_deleting_tmp(task_id):
    box = get_sandbox(task_id)
    box.run("rm -rf .tmp")
    assert box.run("mktemp").output.startswith("/workspace/.tmp/")


def test_a_workspace_that_grows_fast_is_counted_again_before_it_can_fill():
    """The quota of an isolated command is a count of its workspace while it runs; the next
    count must come before the room left could fill at the rate just seen, whatever the disk."""
    mib = 1024**2
    # 40 MiB written in 20 ms (2 GB/s), 20 MiB of room left: full in 10 ms at that rate
    wait = next_quota_check(0.01, 20 * mib, (0.0, 0), (0.02, 40 * mib), counting=0.0)
    assert QUOTA_CHECK_MIN_S <= wait <= 0.010 / 2
    # nearly full at that rate: as soon as the floor allows, never a 0 s busy loop
    assert next_quota_check(0.01, 1, (0.0, 0), (0.02, 40 * mib), counting=0.0) \
        == QUOTA_CHECK_MIN_S
    # a workspace that does not grow: the wait doubles, up to the ceiling
    assert next_quota_check(0.004, mib, (0.0, 5), (0.004, 5), counting=0.0) == 0.008
    assert next_quota_check(0.04, mib, (0.0, 5), (0.04, 5), counting=0.0) == QUOTA_CHECK_MAX_S
    # a huge workspace whose count takes 30 ms is counted at most a tenth of the time
    assert next_quota_check(0.004, mib, (0.0, 0), (0.02, 40 * mib), counting=0.03) == 0.3
