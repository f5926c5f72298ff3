"""Without root, the agent owns its folders: the quota and cleanup must cope (issue 25, item 8).

As an ordinary user (bubblewrap unprivileged) the agent's commands run with the host
process's uid. ``chmod 300`` then makes a folder unlistable to the host too: the quota skipped
it (5 × 40 MiB written past a 50 MiB quota), cleanup crashed in its error handler, and a
cleanup that chmod'ed by name changed a host file that a link pointed at. Root bypasses every
one of these permission checks, so each case here runs ``_tree`` (standard library only) as
``nobody`` in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

TREE = Path(__file__).resolve().parents[2] / "environments" / "tools" / "sandbox" / "_tree.py"
NOBODY = 65534
PYTHON = "/usr/bin/python3"  # the venv's interpreter lives under /root, closed to nobody

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path(PYTHON).exists() or shutil.which("setpriv") is None,
    reason="needs root (to become nobody), setpriv and a system python3")


def _as_nobody(script: str, *args: str) -> dict:
    program = ("import importlib.util, json, os, sys\n"
               f"spec = importlib.util.spec_from_file_location('_tree', {str(TREE)!r})\n"
               "tree = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(tree)\n"
               + script)
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", PYTHON, "-c", program, *args],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def space():
    # pytest's tmp_path is root's (0700): nobody could not reach a folder inside it
    top = Path(tempfile.mkdtemp(prefix="hermes-unpriv-"))
    os.chmod(top, 0o755)
    os.chown(top, NOBODY, NOBODY)  # the sandbox root is the user's, as in a real run
    work = top / "work"
    work.mkdir()
    os.chown(work, NOBODY, NOBODY)
    yield top, work
    shutil.rmtree(top, ignore_errors=True)


def test_a_chmod_300_folder_does_not_hide_files_from_the_quota(space) -> None:
    _, work = space
    out = _as_nobody(
        "work = sys.argv[1]\nos.makedirs(work + '/hidden/deeper')\n"
        "for i in range(5):\n"
        "    with open(f'{work}/hidden/deeper/f{i}', 'wb') as fh:\n"
        "        fh.write(os.urandom(400_000))\n"
        "os.chmod(work + '/hidden/deeper', 0o300)\nos.chmod(work + '/hidden', 0o300)\n"
        "used = tree.tree_bytes(work, 10**9)\n"
        "modes = [oct(os.stat(work + p).st_mode & 0o777) for p in ('/hidden',)]\n"
        "print(json.dumps({'used': used, 'modes': modes, "
        "'stopped': tree.tree_bytes(work, 1_000_000)}))", str(work))
    assert out["used"] >= 5 * 400_000
    assert out["stopped"] > 1_000_000
    assert out["modes"] == ["0o300"]  # measured, then left as the agent set it


def test_cleanup_removes_folders_the_agent_closed_and_never_chmods_through_a_link(
        space) -> None:
    top, work = space
    host_file = top / "host.txt"  # a host file of the same user, reachable by a link
    host_file.write_text("host data\n")
    os.chown(host_file, NOBODY, NOBODY)
    os.chmod(host_file, 0o644)
    host_dir = top / "hostdir"
    host_dir.mkdir()
    os.chown(host_dir, NOBODY, NOBODY)
    os.chmod(host_dir, 0o755)
    out = _as_nobody(
        "work, host_file, host_dir = sys.argv[1:4]\n"
        "for d in ('a/b/c', 'shut', 'ro'):\n    os.makedirs(f'{work}/{d}', exist_ok=True)\n"
        "open(work + '/a/b/c/x', 'w').write('x')\nopen(work + '/shut/y', 'w').write('y')\n"
        "os.symlink(host_file, work + '/ro/link')\nos.symlink(host_dir, work + '/ro/dirlink')\n"
        "os.symlink(host_file, work + '/shut/link')\n"
        "os.chmod(work + '/a/b', 0o000)\nos.chmod(work + '/shut', 0o300)\n"
        "os.chmod(work + '/ro', 0o500)\n"
        "gone = tree.remove_tree(work)\n"
        "print(json.dumps({'gone': gone, 'exists': os.path.lexists(work)}))",
        str(work), str(host_file), str(host_dir))
    assert out == {"gone": True, "exists": False}
    assert host_file.read_text() == "host data\n"
    assert oct(host_file.stat().st_mode & 0o777) == "0o644"
    assert oct(host_dir.stat().st_mode & 0o777) == "0o755"
