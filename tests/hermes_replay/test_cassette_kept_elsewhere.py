"""A cassette kept outside the project replays with the project's env file (issue 25, item 26).

A user downloads a CI artifact or keeps recordings in a shared folder, stands in their project
and runs ``hermes-replay replay /elsewhere/process.jsonl``. The header names
``environments/calc_tool_env.py`` relative to the project; before the fix the replay answered
"the recorded env file … was not found from the working directory" although the file was right
there. Now the file is looked for in the project the user stands in (the working directory and
its real root) first — and, as the trust model says, a marker planted beside the recording does
not make its folder a project: a copy of the env shipped next to the recording, even one that
really derives from atroposlib's ``BaseEnv``, is not run in its place.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hermes_replay import run_cassette
from hermes_replay._errors import CassetteError
from hermes_replay.cli import main

CASSETTE_REL = Path("cassettes/calc_tool_env/process.jsonl")
# A real environment (it derives from the project's base class, so the static check passes)
# that leaves a mark the moment its module body runs.
PLANTED = ("from pathlib import Path\n"
           "Path(__file__).with_name('RAN').write_text('ran')\n"
           "from environments.hermes_base_env import HermesAgentBaseEnv\n\n"
           "class Planted(HermesAgentBaseEnv):\n    pass\n")


def _move_out(project: Path, elsewhere: Path) -> Path:
    elsewhere.mkdir(parents=True)
    target = elsewhere / "process.jsonl"
    shutil.move(str(project / CASSETTE_REL), target)
    return target


@pytest.mark.parametrize("marker", [None, "pyproject.toml"])
def test_a_cassette_kept_elsewhere_replays_with_the_projects_env(
        calc_project: Path, tmp_path: Path, marker: str | None, capsys) -> None:
    if marker:
        (calc_project / marker).write_text("", encoding="utf-8")
    cassette = _move_out(calc_project, tmp_path / "downloads" / "artifact")
    assert main(["replay", str(cassette)]) == 0, capsys.readouterr()
    out, _ = capsys.readouterr()
    assert "4 rollouts replayed" in out
    result = run_cassette(cassette, out_dir=tmp_path / "out")  # the pytest plugin's path
    assert len(result.rollouts) == 4 and result.error is None


def test_from_a_subfolder_of_the_project_its_root_is_used(
        calc_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (calc_project / "pyproject.toml").write_text("", encoding="utf-8")
    cassette = _move_out(calc_project, tmp_path / "shared")
    monkeypatch.chdir(calc_project / "environments")
    result = run_cassette(cassette, out_dir=tmp_path / "out")
    assert len(result.rollouts) == 4 and result.error is None


@pytest.mark.parametrize("beside", [None, "setup.cfg"])
def test_an_env_shipped_beside_a_cassette_kept_elsewhere_never_runs(
        calc_project: Path, tmp_path: Path, beside: str | None) -> None:
    """The project has no such env (it was renamed); the folder the cassette came in carries
    one at the recorded path, with or without a marker planted to pose as a project root."""
    elsewhere = tmp_path / "downloads" / "pr-42"
    cassette = _move_out(calc_project, elsewhere)
    (calc_project / "environments" / "calc_tool_env.py").rename(
        calc_project / "environments" / "renamed_env.py")
    (elsewhere / "environments").mkdir()
    (elsewhere / "environments" / "calc_tool_env.py").write_text(PLANTED, encoding="utf-8")
    if beside:
        (elsewhere / beside).write_text("", encoding="utf-8")
    with pytest.raises(CassetteError) as caught:
        run_cassette(cassette, out_dir=tmp_path / "out")
    assert str(cassette) in str(caught.value)
    assert not (elsewhere / "environments" / "RAN").exists()
