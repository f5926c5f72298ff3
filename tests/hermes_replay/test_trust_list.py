"""The trust list itself (issue 46, findings 03, 10, 11, 13): what is trusted is the folder
the user trusted — owned by them, the same folder (not one made again at its path), its path
stored unambiguously — and a recording trusts its project, never the home folder or ``/``
above it. With no home folder at all, replay and ``trust --list`` still work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _calc_project import ENV_REL
from test_env_file_trust import CASSETTE_REL

from hermes_replay._runner import trust as trust_module
from hermes_replay._runner.plan import UntrustedProject, find_env_file
from hermes_replay.cli import main


def _git(where: Path, *args: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    subprocess.run(["git", *args], cwd=where, check=True, capture_output=True)


@pytest.fixture
def own_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trust list of this test's own (the session's holds every recorded project)."""
    home = tmp_path / "hermes-home"
    monkeypatch.setenv("HERMES_REPLAY_HOME", str(home))
    return home / "trusted-projects"


def test_no_home_folder_still_replays_and_lists(
        calc_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 10: ``HOME`` unset and a uid with no passwd entry (``env -i`` in an
    arbitrary-uid container): ``replay`` and ``trust --list`` died with ``RuntimeError: Could
    not determine home directory`` even with ``HERMES_REPLAY_TRUST`` set. ``Path.home`` is
    made to fail as it does there."""
    for name in ("HOME", "HERMES_REPLAY_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    monkeypatch.setenv("HERMES_REPLAY_TRUST", str(calc_project))
    # a clone, as in CI: with no config folder there is no record key to show the cassette
    # was recorded here, so git's index is what vouches for the env file (_runner/vouch.py)
    _git(calc_project, "init", "-q")
    _git(calc_project, "add", ENV_REL)
    assert main(["trust", "--list"]) == 0
    assert str(calc_project) in capsys.readouterr().out
    assert main(["replay", str(CASSETTE_REL), "--out", str(tmp_path / "out")]) == 0
    assert "4 rollouts replayed" in capsys.readouterr().out
    # only keeping a folder needs a home, and says what to do instead
    assert main(["trust", "."]) == 2
    err = capsys.readouterr().err
    assert "HERMES_REPLAY_HOME=DIR" in err and "HERMES_REPLAY_TRUST" in err, err


def test_a_path_holding_a_line_break_trusts_nothing_else(
        own_list: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 13: the list was one unescaped path a line, so trusting ``…/x\\n/victim``
    also trusted ``/victim``; and entries were stripped (``/x/proj `` trusted ``/x/proj``)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    evil = Path(f"{tmp_path / 'x'}\n{victim}")
    evil.mkdir(parents=True)
    assert main(["trust", str(evil)]) == 2
    assert "control character" in capsys.readouterr().err
    assert trust_module.trust_reason(victim) is None
    with pytest.raises(trust_module.TrustRefused):
        trust_module.add_trusted(evil)
    assert trust_module.trust_reason(victim) is None

    # a hand-written list of the old format: a trailing blank is part of the name
    project = tmp_path / "proj"
    project.mkdir()
    own_list.parent.mkdir(parents=True, exist_ok=True)
    own_list.write_text(f"{project} \n", encoding="utf-8")
    assert trust_module.trust_reason(project) is None
    # an old-format entry is still read, and gains its folder's identity when rewritten
    own_list.write_text(f"# old list\n{project}\n", encoding="utf-8")
    assert trust_module.trust_reason(project) is not None
    other = tmp_path / "other"
    other.mkdir()
    trust_module.add_trusted(other)
    entries = [json.loads(line) for line in own_list.read_text(encoding="utf-8").splitlines()
               if line.startswith("{")]
    assert [e["path"] for e in entries] == [str(project), str(other)]
    assert all(e["ino"] == os.stat(e["path"]).st_ino for e in entries)


def test_a_folder_made_again_or_owned_by_another_user_is_not_trusted(
        calc_project: Path, own_list: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 11: trust was a bare path, so a trusted folder deleted and made again (by
    another user, on a shared scratch path) stayed trusted and its ``.py`` ran as the user.
    Now the owner and the folder's identity are kept and checked, like git's
    ``safe.directory``; trusting it again is the next step."""
    from _calc_project import copy_project

    trust_module.add_trusted(calc_project)
    monkeypatch.chdir(tmp_path)
    # moved away rather than deleted, so the new folder cannot reuse its inode number (the
    # owner check below is what holds against another user either way)
    saved = calc_project.rename(tmp_path / "saved")
    copy_project(saved, calc_project, trusted=False)  # the same path, another folder
    monkeypatch.chdir(calc_project)
    assert trust_module.trust_reason(calc_project) is None
    with pytest.raises(UntrustedProject, match=r"deleted and made again.*hermes-replay trust"):
        find_env_file("environments/calc_tool_env.py", calc_project / CASSETTE_REL)
    assert main(["trust", "--list"]) == 0
    assert "NOT trusted: it was deleted and made again" in capsys.readouterr().out
    assert main(["trust", "."]) == 0
    assert main(["replay", str(CASSETTE_REL), "--out", str(tmp_path / "out")]) == 0
    assert "4 rollouts replayed" in capsys.readouterr().out

    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    os.chown(calc_project, 4242, -1)
    assert trust_module.trust_reason(calc_project) is None
    with pytest.raises(UntrustedProject, match="owned by uid 4242"):
        find_env_file("environments/calc_tool_env.py", calc_project / CASSETTE_REL)
    assert main(["trust", "."]) == 2
    assert "owned by uid 4242" in capsys.readouterr().err


def test_a_recording_trusts_its_project_never_the_home_folder_or_root(
        _calc_recording: Path, own_list: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 03: ``record`` (or ``probe``) run from a folder above the project trusted that
    folder — ``$HOME``, or ``/`` in a container — for good."""
    from _calc_project import PROCESS_ARGS

    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    home = tmp_path / "home"
    project = home / "work" / "proj"
    shutil.copytree(_calc_recording, project, ignore=shutil.ignore_patterns("data", "cassettes"))
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home)
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        code = main(["record", str(Path("work/proj") / ENV_REL), "--endpoint",
                     endpoint.base_url, "--model", "scripted", "--server-type", "openai",
                     "--cassette", "cassettes/p.jsonl", "--", *PROCESS_ARGS])
    assert code == 0, capsys.readouterr().err
    assert trust_module.trust_reason(home) is None
    assert trust_module.trust_reason(home / "work") is None
    assert trust_module.trust_reason(project) is not None
    header = json.loads((home / "cassettes" / "p.jsonl").read_text().splitlines()[0])
    assert header["env_file"] == ENV_REL  # named from the project's root, which is trusted
    monkeypatch.chdir(project)
    assert main(["replay", str(home / "cassettes" / "p.jsonl"), "--out",
                 str(tmp_path / "out")]) == 0
    assert "4 rollouts replayed" in capsys.readouterr().out

    # a file in no project, recorded from the home folder or from `/`: nothing trusted
    loose = home / "loose.py"
    loose.write_text("", encoding="utf-8")
    note = trust_module.trust_recorded(loose, "loose.py")
    assert note is not None and "your home folder" in note
    note = trust_module.trust_recorded(loose, str(loose)[1:])
    assert note is not None and "the filesystem root" in note
    assert trust_module.trust_reason(home) is None
    assert trust_module.trust_reason(Path("/")) is None
