"""Every interpreter hermes-replay starts runs with the working folder off its ``sys.path``
(issue 46, finding 01).

``cd`` into a downloaded folder of cassettes and replay: the fork server and resource tracker
of ``-j`` (``python -c``) and ``replay --twice``'s fresh interpreters (``python -m``) put that
folder first on ``sys.path``, so a ``multiprocessing/`` or ``hermes_replay/`` package planted
there was imported and ran — while the table said the env file was refused. Here both are
planted in the working folder, each writing a mark the moment it is imported, and every
command that starts an interpreter runs from there: ``replay . -j 2`` and ``replay --twice``
of the download itself, the same of the user's trusted project, ``watch`` (its warm process)
and ``check`` (its reruns and ``show --raw``). No mark may appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_env_file_trust import CASSETTE_REL, _download
from test_watch import WAITING, _Watch

HERMES = str(Path(sys.executable).with_name("hermes-replay"))
PLANTED = ("multiprocessing", "hermes_replay")
# a package that leaves a mark beside itself the moment it is imported
MARK = ("import os\n"
        "_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        "open(os.path.join(_here, 'PLANTED-' + __name__), 'w').write('ran')\n")


def _plant(folder: Path) -> None:
    for name in PLANTED:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(MARK, encoding="utf-8")


def _marks(folder: Path) -> list[str]:
    """The marks left, taken away (so each command is judged on its own)."""
    found = sorted(folder.glob("PLANTED-*"))
    for mark in found:
        mark.unlink()
    return [p.name for p in found]


def _run(folder: Path, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HERMES, *argv], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1"},
                          stdin=subprocess.DEVNULL)


def test_no_interpreter_the_tool_starts_imports_from_the_working_folder(
        calc_project: Path, tmp_path: Path) -> None:
    folder = _download(tmp_path / "Downloads" / "pr-46", calc_project / CASSETTE_REL, None)
    _plant(folder)
    # two cassettes in each, so `-j 2` replays in worker processes (one would run in-process)
    (folder / "again").mkdir()
    shutil.copy(folder / "process.jsonl", folder / "again" / "process.jsonl")
    (calc_project / "cassettes" / "again").mkdir()
    shutil.copy(calc_project / CASSETTE_REL, calc_project / "cassettes" / "again" / "process.jsonl")
    cassettes = str(calc_project / "cassettes")
    runs = {
        # the download itself: its env file is refused, in the workers / fresh interpreters
        "replay . -j 2": (["replay", ".", "-j", "2", "--out", str(tmp_path / "o1")], ""),
        "replay --twice .": (["replay", "--twice", ".", "--out", str(tmp_path / "o2")], ""),
        # the user's own trusted project, replayed from that folder: runs for real
        "replay PROJECT -j 2": (["replay", cassettes, "-j", "2", "--out",
                                 str(tmp_path / "o3")], "2 cassettes in 2 processes"),
        "replay --twice PROJECT": (["replay", "--twice", cassettes, "--out",
                                    str(tmp_path / "o4")], "2 of 2 cassette(s) replay the same"),
    }
    ran: dict[str, list[str]] = {}
    for name, (argv, ok) in runs.items():
        done = _run(folder, *argv)
        ran[name] = _marks(folder)
        if ran[name]:
            continue  # judged below, with the others
        assert (done.returncode == 0) == bool(ok), f"{name}: {done.stdout}\n{done.stderr}"
        assert (ok or "not a folder you trust") in done.stdout + done.stderr, \
            f"{name}: {done.stdout}\n{done.stderr}"
    assert not (folder / "RAN").exists()

    watch = _Watch(folder, cassettes)  # its warm process, started from the download
    try:
        watch.until(WAITING)
    finally:
        watch.stop()
    ran["watch PROJECT"] = _marks(folder)

    done = _run(folder, "check", str(calc_project / "environments" / "calc_tool_env.py"),
                "--cassette", str(calc_project / "cassettes" / "calc_tool_env"),
                "--out", str(tmp_path / "o5"))
    ran["check ENV --cassette"] = _marks(folder)
    assert {name: marks for name, marks in ran.items() if marks} == {}, \
        "a package planted in the working folder ran"


@pytest.mark.parametrize("how", ["-m", "-c"])
def test_python_command_leaves_the_working_folder_out(tmp_path: Path, how: str) -> None:
    """The one helper every such command goes through, on its own."""
    from hermes_replay._interpreter import python_command

    _plant(tmp_path)
    what = "hermes_replay.cli" if how == "-m" else "import hermes_replay, multiprocessing"
    args = ["--version"] if how == "-m" else []
    done = subprocess.run(python_command(how, what, *args), cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _marks(tmp_path) == []
