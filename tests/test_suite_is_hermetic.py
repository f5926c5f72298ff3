"""The suite does not depend on what else lies on the machine (issue 36, item 3).

A clean-clone CI run once failed 49 tests because another program had left one cassette file
directly in /tmp. This runs a slice of the suite that replays projects of its own (the CLI,
``run_cassette``, the pytest plugin) in a sub-session whose /tmp, $HOME and the folder above
its temp folders each hold a stray cassette, and requires every test to pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRAY = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"
SLICE = [
    "tests/hermes_replay/test_cassette_kept_elsewhere.py",
    "tests/hermes_replay/test_env_file_trust.py::test_a_clone_replays_in_ci_with_one_line",
    "tests/hermes_replay/test_pytest_plugin.py::"
    "test_a_first_run_says_to_write_the_snapshot_once",
]


def test_stray_cassettes_in_tmp_home_and_above_change_nothing(tmp_path: Path) -> None:
    above = tmp_path / "machine"
    tmp, home = above / "tmp", above / "home" / "user"
    for folder in (above, tmp, home, home / ".config"):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(STRAY, folder / "x.jsonl")
    (home / ".config" / "hermes-replay").mkdir()  # a trust list the suite must not read
    (home / ".config" / "hermes-replay" / "trusted-projects").write_text(
        f"{tmp}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "HERMES_REPLAY_")) and k != "XDG_CONFIG_HOME"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--basetemp", str(tmp / "basetemp"), *SLICE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and "failed" not in done.stdout, tail


def _limited_import(code_prelude: str, prefix: Path) -> None:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", code_prelude + "import hermes_replay.cli\n"],
                   env=env, check=True, timeout=120, capture_output=True)


def test_a_child_under_a_file_size_limit_leaves_no_truncated_bytecode(tmp_path: Path) -> None:
    """The suite's full-disk tests run children under ``RLIMIT_FSIZE``; as the first importer
    of a module such a child once left truncated bytecode in the folder all the suite's
    interpreters share, and 40 unrelated tests failed with ``marshal data too short``."""
    from _limited_writes import PRELUDE, limited_code, truncated_bytecode

    # what the suite's limited children do: nothing written, so nothing truncated
    _limited_import(limited_code(600, ""), tmp_path / "kept")
    assert not truncated_bytecode(0, tmp_path / "kept")
    # the harm is real: without it, CPython renames a short write into place
    unguarded = PRELUDE.replace("sys.dont_write_bytecode = True\n", "")
    _limited_import(unguarded + "resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))\n",
                    tmp_path / "harmed")
    assert truncated_bytecode(0, tmp_path / "harmed")
