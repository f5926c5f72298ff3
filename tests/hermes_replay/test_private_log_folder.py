"""The default env-log folder is this user's alone (issue 25, item 5).

The temp folder is shared by every local user. Another one can create
``<temp>/hermes-replay-logs…`` first, or swap a log for a link to a file of root's; a root
``record`` would then write its env output through the link. The default folder is per user,
made 0700 and checked on every use (a real folder, owned by us, closed to others); each log is
created with ``O_EXCL|O_NOFOLLOW``, and a folder that fails a check is refused with the next
step, never trusted as found.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from hermes_replay._runner.log_folder import (
    LOG_DIR_VARIABLE,
    LogFolderError,
    default_log_folder,
    env_log_path,
)
from hermes_replay.cli import main


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir(mode=0o1777)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(root))
    monkeypatch.delenv(LOG_DIR_VARIABLE, raising=False)
    return root


def test_the_default_folder_is_private_and_per_user(temp_root: Path) -> None:
    log = env_log_path("record", Path("env.py"), "process")
    folder = log.parent
    assert folder == temp_root / f"hermes-replay-logs-{os.getuid()}"
    info = os.lstat(folder)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert env_log_path("record", Path("env.py"), "process") != log  # a new file each run


@pytest.mark.parametrize("planted", ["other-user", "open-mode", "link"])
def test_a_planted_default_folder_is_refused_and_its_target_untouched(
        temp_root: Path, tmp_path: Path, planted: str) -> None:
    folder = temp_root / f"hermes-replay-logs-{os.getuid()}"
    victim = tmp_path / "victim.txt"
    victim.write_text("root's file\n")
    if planted == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir(mode=0o700)
        if planted == "open-mode":
            folder.chmod(0o777)
        else:
            if os.getuid() != 0:
                pytest.fail("this check needs root to give the folder to another user")
            os.chown(folder, 65534, 65534)
    with pytest.raises(LogFolderError, match=f"{LOG_DIR_VARIABLE}") as caught:
        default_log_folder()
    assert str(folder) in str(caught.value)
    with pytest.raises(LogFolderError):
        env_log_path("record", Path("env.py"), "process")
    assert victim.read_text() == "root's file\n"
    assert not any(p.suffix == ".log" for p in tmp_path.rglob("*.log"))


def test_the_cli_says_what_to_do_about_a_planted_folder(
        temp_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (temp_root / f"hermes-replay-logs-{os.getuid()}").symlink_to(tmp_path)
    env = tmp_path / "envs" / "x_env.py"
    env.parent.mkdir()
    env.write_text("from atroposlib.envs.base import BaseEnv\nclass X(BaseEnv):\n    pass\n")
    cassette = tmp_path / "c.jsonl"
    cassette.write_text('{"type": "header", "schema_version": 2, "command": ["process"]}\n')
    monkeypatch.chdir(tmp_path)
    code = main(["replay", "envs/x_env.py", "--cassette", str(cassette), "--", "process"])
    err = capsys.readouterr().err
    assert code == 2
    assert "is not a folder" in err and LOG_DIR_VARIABLE in err and "Traceback" not in err
