"""Which env file a cassette may run: only one in a folder the user trusts (issue 36, item 2).

The rule (``hermes_replay/_runner/trust.py``, docs/reliability.md): a cassette's header names
its env file relative to a project; replay looks that name up only from folders the user
trusts — recorded in, installed from (``pip install -e``), given to ``hermes-replay trust``,
listed in ``$HERMES_REPLAY_TRUST``, or the pytest session's rootdir. What lies in folders
around the project (a stray cassette in /tmp, a marker file) changes nothing either way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import trust

from hermes_replay import run_cassette
from hermes_replay._runner import trust as trust_module
from hermes_replay._runner.plan import UnsafeEnvFile, UntrustedProject, find_env_file
from hermes_replay.cli import main

CASSETTE_REL = Path("cassettes/calc_tool_env/process.jsonl")
# A real environment by every static check (it derives from the layer's base class) that
# leaves a mark the moment its module body runs.
EVIL = ("from pathlib import Path\n"
        "Path(__file__).with_name('RAN').write_text('ran')\n"
        "from environments.hermes_base_env import HermesAgentBaseEnv\n\n"
        "class Evil(HermesAgentBaseEnv):\n    pass\n\n"
        "if __name__ == '__main__':\n    Evil.cli()\n")


def _stray_cassette(folder: Path, source: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stray = folder / "x.jsonl"
    shutil.copy(source, stray)
    return stray


def _download(folder: Path, cassette: Path, marker: str | None) -> Path:
    """What a downloaded archive unpacks to: a cassette naming ``evil.py`` beside it, the
    file itself and, maybe, a marker that makes the folder look like a project."""
    folder.mkdir(parents=True)
    lines = cassette.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["env_file"] = "evil.py"
    header.get("extra", {}).pop("env_cwd", None)
    (folder / "process.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n",
                                          encoding="utf-8")
    (folder / "evil.py").write_text(EVIL, encoding="utf-8")
    if marker == ".git":
        (folder / ".git").mkdir()
    elif marker:
        (folder / marker).write_text("", encoding="utf-8")
    return folder


@pytest.mark.parametrize("marker", [None, "pyproject.toml"])
def test_a_stray_cassette_above_the_project_never_blocks_its_replay(
        _calc_recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], marker: str | None) -> None:
    """Finding "the stray cassette": a cassette file left in any folder above a project (by
    another program, in /tmp or $HOME) used to refuse every replay below it."""
    from _calc_project import copy_project

    outer = tmp_path / "tmp-like"
    project = copy_project(_calc_recording, outer / "scratch" / "project", trusted=False)
    for folder in (outer, outer / "scratch"):
        _stray_cassette(folder, project / CASSETTE_REL)
    if marker:
        (project / marker).write_text("", encoding="utf-8")
        (outer / marker).write_text("", encoding="utf-8")  # and a marker above it, too
    trust(project)
    monkeypatch.chdir(project)
    assert main(["replay", str(CASSETTE_REL), "--out", str(tmp_path / "out")]) == 0, \
        capsys.readouterr()
    assert "4 rollouts replayed" in capsys.readouterr().out


@pytest.mark.parametrize("marker", [None, "setup.cfg", ".git", "pyproject.toml"])
def test_a_downloaded_folder_never_runs_its_env_file_from_inside(
        _calc_recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], marker: str | None) -> None:
    """Finding 14 (high): ``cd`` into a downloaded folder and ``hermes-replay replay
    process.jsonl`` imported its ``evil.py`` (a real ``BaseEnv``) before failing."""
    folder = _download(tmp_path / "Downloads" / "pr-42", _calc_recording / CASSETTE_REL, marker)
    monkeypatch.chdir(folder)
    for argv in (["replay", "process.jsonl"], ["replay", "."], ["replay", ".", "-j", "2"]):
        capsys.readouterr()
        code = main([*argv, "--out", str(tmp_path / f"out-{len(argv)}")])
        err = capsys.readouterr().err
        assert code != 0
        assert not (folder / "RAN").exists(), "the downloaded evil.py was imported"
        assert "hermes-replay trust" in err and "not a folder you trust" in err, err
    with pytest.raises(UntrustedProject, match=r"hermes-replay replay .*evil\.py --cassette"):
        run_cassette(folder / "process.jsonl", out_dir=tmp_path / "out-api")
    assert not (folder / "RAN").exists()


def test_a_downloaded_folder_inside_a_trusted_project_is_not_trusted(
        calc_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Trust is by folder, exactly: a download unpacked inside the user's project, with its
    own marker, is not a root a cassette may resolve names from — and naming the file by its
    path from the project root lands in a folder that holds a cassette, refused as well."""
    folder = _download(calc_project / "downloads" / "pr-7", calc_project / CASSETTE_REL,
                       "setup.cfg")
    monkeypatch.chdir(folder)
    assert main(["replay", "process.jsonl", "--out", str(tmp_path / "o1")]) != 0
    assert "not a folder you trust" in capsys.readouterr().err
    header, *rest = (folder / "process.jsonl").read_text(encoding="utf-8").splitlines()
    edited = json.loads(header)
    edited["env_file"] = "downloads/pr-7/evil.py"
    (folder / "process.jsonl").write_text("\n".join([json.dumps(edited), *rest]) + "\n",
                                          encoding="utf-8")
    monkeypatch.chdir(calc_project)
    assert main(["replay", str(folder / "process.jsonl"), "--out", str(tmp_path / "o2")]) != 0
    assert "a folder that holds cassettes" in capsys.readouterr().err
    assert not (folder / "RAN").exists()


def test_the_user_says_so_by_trusting_the_folder_or_naming_the_file(
        _calc_recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The same downloaded folder runs once the user chose it: ``hermes-replay trust .``,
    the way ``direnv allow`` works (the env then runs and fails on its own terms: it is a
    stub; what matters is that the user's word, not the cassette's, made it run)."""
    folder = _download(tmp_path / "Downloads" / "pr-43", _calc_recording / CASSETTE_REL,
                       "setup.cfg")
    monkeypatch.chdir(folder)
    assert main(["trust", "."]) == 0
    assert f"{folder} trusted" in capsys.readouterr().out
    assert find_env_file("evil.py", folder / "process.jsonl") == folder / "evil.py"
    assert main(["trust", "--list"]) == 0
    assert str(folder) in capsys.readouterr().out
    assert main(["trust", str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_a_clone_replays_in_ci_with_one_line(
        _calc_recording: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh clone, never recorded or installed here: refused with the one line to add,
    then replayed with it (``HERMES_REPLAY_TRUST="$PWD"``, as docs/reliability.md says)."""
    from _calc_project import copy_project

    clone = copy_project(_calc_recording, tmp_path / "clone", trusted=False)
    (clone / ".git").mkdir()
    monkeypatch.chdir(clone)
    assert main(["replay", "cassettes", "--out", str(tmp_path / "o1")]) != 0
    assert 'HERMES_REPLAY_TRUST="$PWD"' in capsys.readouterr().err
    monkeypatch.setenv("HERMES_REPLAY_TRUST", str(clone))
    assert main(["replay", "cassettes", "--out", str(tmp_path / "o2")]) == 0
    assert "4 rollouts replayed" in capsys.readouterr().out


def test_recording_trusts_the_project_it_ran(_calc_recording: Path) -> None:
    """The session's calc project was recorded through ``hermes-replay record``: the user ran
    its code, so its replays may run it again without a separate step."""
    assert trust_module.trust_reason(_calc_recording) is not None
    assert str(_calc_recording.resolve()) in \
        (trust_module.config_dir() / "trusted-projects").read_text(encoding="utf-8")


def test_a_folder_installed_into_this_python_is_trusted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pip install -e .`` of a clone trusts it (PEP 610's direct_url.json names the
    folder): the quick start and a CI that installs the project need no extra step."""
    project = tmp_path / "installed-project"
    project.mkdir()
    site = tmp_path / "site"
    info = site / "someproject-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: someproject\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "direct_url.json").write_text(json.dumps(
        {"url": project.as_uri(), "dir_info": {"editable": True}}), encoding="utf-8")
    trust_module._installed_sources.cache_clear()
    assert trust_module.trust_reason(project) is None
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    trust_module._installed_sources.cache_clear()
    try:
        assert "pip install -e" in (trust_module.trust_reason(project) or "")
    finally:
        monkeypatch.undo()
        trust_module._installed_sources.cache_clear()


def test_the_trust_list_survives_concurrent_writers(tmp_path: Path) -> None:
    """Two recordings finishing at once must not lose an entry (a lock and a rename)."""
    from concurrent.futures import ThreadPoolExecutor

    folders = [tmp_path / f"p{i}" for i in range(24)]
    for folder in folders:
        folder.mkdir()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(trust_module.add_trusted, folders))
    roots = set(trust_module.trusted_roots())
    assert all(folder.resolve() in roots for folder in folders)


def _unpack_one_folder_deeper(project: Path, cassette: Path) -> Path:
    """Issue 46, finding 02's archive: ``artifact/recordings/process.jsonl`` naming
    ``artifact/env/evil.py`` (the file one folder beside the cassette's, so no folder on the
    file's own path holds a cassette or is named ``cassettes``), unpacked in ``project``."""
    lines = cassette.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["env_file"] = "artifact/env/evil.py"
    header.get("extra", {}).pop("env_cwd", None)
    (project / "artifact" / "recordings").mkdir(parents=True)
    (project / "artifact" / "env").mkdir()
    shipped = project / "artifact" / "recordings" / "process.jsonl"
    shipped.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    (project / "artifact" / "env" / "evil.py").write_text(EVIL, encoding="utf-8")
    return shipped


def test_a_download_inside_a_trusted_project_never_runs_its_own_file(
        calc_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46, finding 02 (high): the refusal only looked for folders named ``cassettes``
    or holding a cassette on the file's own path, so a cassette one folder deeper than the
    file it names ran it. Now a file found in a trusted project runs only when something
    shows it is the project's (``_runner/vouch.py``): the cassette's seal of a recording made
    here, git tracking it, or the user's ``trust`` of the folder after it arrived."""
    import time

    time.sleep(0.05)  # the download arrives after the project was trusted (a clock tick)
    shipped = _unpack_one_folder_deeper(calc_project, calc_project / CASSETTE_REL)
    ran = calc_project / "artifact" / "env" / "RAN"
    for where in (calc_project, shipped.parent):
        monkeypatch.chdir(where)
        for argv in (["replay", str(shipped)], ["replay", str(shipped.parent)],
                     ["replay", str(calc_project / "artifact"), "-j", "2"]):
            capsys.readouterr()
            code = main([*argv, "--out", str(tmp_path / f"out-{len(argv)}")])
            err = capsys.readouterr().err
            assert code != 0
            assert not ran.exists(), f"{argv} from {where}: the downloaded evil.py ran"
            assert "nothing shows it is that project's own" in err, err
    with pytest.raises(UnsafeEnvFile, match=r"hermes-replay replay .*evil\.py --cassette"):
        run_cassette(shipped, out_dir=tmp_path / "out-api")
    assert not ran.exists()

    # the project's own cassette still replays (sealed by the recording that made it)
    monkeypatch.chdir(calc_project)
    assert main(["replay", str(CASSETTE_REL), "--out", str(tmp_path / "own")]) == 0
    # a git project: the download is not in its index, the env is
    subprocess.run(["git", "init", "-q"], cwd=calc_project, check=True)
    subprocess.run(["git", "add", "environments"], cwd=calc_project, check=True)
    assert main(["replay", str(shipped), "--out", str(tmp_path / "git")]) != 0
    assert not ran.exists()
    # the seal is of the name: the project's own sealed cassette, renamed to the download's
    # file, is refused as well
    lines = (calc_project / CASSETTE_REL).read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["extra"]["env_seal"].startswith("v1:")
    header["env_file"] = "artifact/env/evil.py"
    shipped.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    assert main(["replay", str(shipped), "--out", str(tmp_path / "seal")]) != 0
    assert not ran.exists()
    # the user's word: trusting the folder again vouches for what it holds now
    assert main(["trust", "."]) == 0
    assert find_env_file("artifact/env/evil.py", shipped) == calc_project / "artifact" / \
        "env" / "evil.py"
