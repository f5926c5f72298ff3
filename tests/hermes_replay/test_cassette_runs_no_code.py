"""A folder of recordings never runs its own Python (issue 25, item 1).

Each layout below is what a pull request that adds only recordings could carry: a cassette
whose header names a ``.py`` shipped beside it, with a marker file (``setup.cfg``, a one-line
``.git``) planted so the folder looks like a project root, and a class that derives from a
local class *named* ``BaseEnv``. Every way a cassette is replayed — a folder, one file, ``-j``,
and ``run_cassette`` (what the pytest plugin's ``replay_run`` and the shipped-cassettes test
call) — must refuse it with a message naming the cassette, before the file runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import trust

from hermes_replay import run_cassette
from hermes_replay._errors import CassetteError
from hermes_replay._runner.env_guard import env_classes
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "cassettes" / "terminal_test_env" / "process.jsonl"
# Looks like an environment to anything that matches base classes by name, and writes a file
# the moment it is executed.
EVIL = ("from pathlib import Path\nPath(__file__).with_name('RAN').write_text('ran')\n"
        "Path.cwd().joinpath('RAN').write_text('ran')\n"
        "class BaseEnv:\n    pass\n\nclass Evil(BaseEnv):\n    pass\n")
LAYOUTS = {
    # folder                 marker files        cassette below the folder
    "cassettes-setup-cfg": ("cassettes/x", {"setup.cfg": ""}, "process.jsonl"),
    "cassettes-git-file": ("cassettes/x", {".git": "gitdir: /nowhere\n"}, "process.jsonl"),
    "other-name": ("recordings/x", {"setup.cfg": "", "pyproject.toml": ""}, "process.jsonl"),
    "nested": ("recordings/x", {"setup.cfg": ""}, "y/process.jsonl"),
}


def _plant(project: Path, layout: str) -> tuple[Path, Path]:
    """The layout's folder and cassette, in a project with a real root marker that the user
    trusts (their own project: what a pull request adds to it must still not run)."""
    (project / "pyproject.toml").write_text("", encoding="utf-8")
    trust(project)
    folder, markers, cassette_rel = LAYOUTS[layout]
    where = project / folder
    cassette = where / cassette_rel
    cassette.parent.mkdir(parents=True)
    for name, text in markers.items():
        (where / name).write_text(text, encoding="utf-8")
    (where / "evil.py").write_text(EVIL, encoding="utf-8")
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    # relative to the planted "root", which is where the cassette says it was recorded
    header["env_file"] = "evil.py"
    cassette.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return where, cassette


def _ran(project: Path) -> list[Path]:
    return sorted(project.rglob("RAN"))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("how", ["folder", "file", "jobs"])
def test_the_cli_refuses_a_cassette_that_names_its_own_python(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        layout: str, how: str) -> None:
    where, cassette = _plant(tmp_path, layout)
    monkeypatch.chdir(tmp_path)
    target = {"folder": where, "file": cassette, "jobs": where.parent}[how]
    argv = ["replay", str(target.relative_to(tmp_path)), "--out", "out"]
    if how == "jobs":
        argv += ["-j", "2"]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert _ran(tmp_path) == [], "the cassette's own evil.py was executed"
    assert str(cassette.relative_to(tmp_path)) in err or str(cassette) in err, err


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_run_cassette_refuses_from_the_cassette_folder_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """``replay_run``'s path, also when the user stands in the planted folder."""
    where, cassette = _plant(tmp_path, layout)
    for cwd in (tmp_path, where):
        monkeypatch.chdir(cwd)
        with pytest.raises(CassetteError) as caught:
            run_cassette(cassette, out_dir=tmp_path / "out")
        assert _ran(tmp_path) == []
        assert str(cassette) in str(caught.value) or "evil.py was not found" in str(caught.value)


def test_a_project_file_deriving_from_a_lookalike_base_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside every cassette folder, a class must still derive from atroposlib's *real*
    ``BaseEnv``, found by reading the imports — not a local class of that name, not a planted
    ``atroposlib`` package beside the file."""
    _, cassette = _plant(tmp_path, "cassettes-setup-cfg")
    shutil.copy(cassette.parent / "evil.py", tmp_path / "evil.py")
    fake = tmp_path / "atroposlib" / "envs"
    fake.mkdir(parents=True)
    (tmp_path / "atroposlib" / "__init__.py").write_text("", encoding="utf-8")
    (fake / "__init__.py").write_text("", encoding="utf-8")
    (fake / "base.py").write_text("class BaseEnv:\n    pass\n", encoding="utf-8")
    (tmp_path / "planted_env.py").write_text(
        "from atroposlib.envs.base import BaseEnv\nclass Evil(BaseEnv):\n    pass\n",
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert env_classes(tmp_path / "evil.py", roots=[tmp_path]) == []
    assert env_classes(tmp_path / "planted_env.py", roots=[tmp_path]) == []
    with pytest.raises(CassetteError, match="no environment class") as caught:
        run_cassette(cassette, out_dir=tmp_path / "out")
    assert "process.jsonl" in str(caught.value)
    assert _ran(tmp_path) == []


def test_real_bases_are_resolved_through_imports_of_any_shape(tmp_path: Path) -> None:
    env = tmp_path / "shapes_env.py"
    env.write_text(
        "import atroposlib.envs.base\nimport atroposlib.envs.base as b\n"
        "from atroposlib.envs import base\n"
        "from environments import hermes_base_env as h\n"
        "class A(atroposlib.envs.base.BaseEnv):\n    pass\n"
        "class B(b.BaseEnv):\n    pass\nclass C(base.BaseEnv):\n    pass\n"
        "class D(h.HermesAgentBaseEnv):\n    pass\nclass E(D):\n    pass\n"
        "class F(b.BaseEnvConfig):\n    pass\n", encoding="utf-8")
    assert env_classes(env, roots=[tmp_path]) == ["A", "B", "C", "D", "E"]
