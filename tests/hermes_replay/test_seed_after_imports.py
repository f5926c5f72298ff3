"""Replay's seeding holds whatever the process imported before (issue 25, item 11).

``import_draw_env`` imports a module that draws from ``random`` at import time (as ``rich``
does) and shuffles its questions unseeded in ``setup()``. It is recorded in a process that
already imported that module (as the CLI has imported ``rich`` before it seeds), and replayed
where the module is imported for the first time during the run (a fresh interpreter:
``run_cassette`` in CI, each run of ``--twice``, ``check``): every replay must ask the
recorded questions, with no miss.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay._check._dynamic import Target
from hermes_replay._check._runs import check_dynamic
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).parent / "seed_envs"
MODULE = "draws_at_import"
ENV = "envs/import_draw_env.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "envs").mkdir()
    for name in ("import_draw_env.py", f"{MODULE}.py"):
        shutil.copy(HERE / name, tmp_path / "envs" / name)
    monkeypatch.syspath_prepend(str(tmp_path / "envs"))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield tmp_path
    sys.modules.pop(MODULE, None)


def _record_after_importing_the_module(capsys: pytest.CaptureFixture) -> Path:
    importlib.import_module(MODULE)  # imported before the run, as the CLI imports rich
    with ScriptedEndpoint(script="generic", seed=0) as ep:
        code = main(["record", ENV, "--endpoint", ep.base_url, "--model", "scripted", "--",
                     "process", "--env.total_steps", "2", "--env.group_size", "2",
                     "--env.use_wandb", "false"])
    captured = capsys.readouterr()
    assert code == 0, captured.err + captured.out
    sys.modules.pop(MODULE)  # the replays import it for the first time, as a fresh process does
    return Path("cassettes/import_draw_env/process.jsonl").resolve()


def test_run_cassette_replays_when_the_module_is_first_imported_during_the_run(
        project: Path, capsys: pytest.CaptureFixture) -> None:
    cassette = _record_after_importing_the_module(capsys)
    result = hermes_replay.run_cassette(cassette, out_dir=project / "out", raise_errors=False)
    assert MODULE in sys.modules  # the env imported it during the run, after the first seed
    assert result.error is None, result.error
    assert result.misses == [] and len(result.rollouts) == 4


def test_check_process_rerun_and_twice_rows_pass(project: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """Also ``replay --twice``'s question: the check's twice row compares its process run
    with the rerun's first run (two fresh interpreters), and each must replay cleanly, not
    merely alike."""
    from hermes_replay._check._runs import TRACE_FILE
    from hermes_replay._runner.twice import read_trace

    cassette = _record_after_importing_the_module(capsys)
    work = project / "check"
    rows = {row.rule: row
            for row in check_dynamic(Path(ENV), ENV, Target(cassette=cassette), keep=work)}
    for rule in ("process", "rerun", "twice"):
        assert rows[rule].status == "pass", (rule, rows[rule].findings)
    assert not (work / "twice").exists()  # no replays of its own: the check's runs were used
    # the process run and both runs of rerun (the first is the twice row's second run) each
    # scored all 4 recorded rollouts; exit 0 and a passing rerun row mean none missed
    for trace in (work / "process" / TRACE_FILE, work / "rerun" / "trace-1.jsonl",
                  work / "rerun" / "trace-2.jsonl"):
        entries = read_trace(trace)
        assert sum(e["kind"] == "outcome" for e in entries) == 4, trace
        assert sum(e["kind"] == "request" for e in entries) >= 4, trace
