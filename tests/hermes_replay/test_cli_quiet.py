"""Runs are quiet by default: the environment's own output — atroposlib's config dump, its INFO
lines and UserWarnings — goes to the env log, ``-v`` puts it on the terminal, and a crash shows
the end of the log. Through ``hermes-replay record`` with a real env (the calc env, a user env
on the project's base class) against the scripted endpoint.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _calc_project import ENV_REL, PROCESS_ARGS, write_project

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

# What atroposlib writes on every run; none of it belongs on a quiet terminal.
LIBRARY_NOISE = ("CalcEnvConfig(", "APIServerConfig(", "UserWarning", "INFO atroposlib")
KEY = "sk-quietrun-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from environments.tools import registry

    # the env registers its own tool at import: gone again after the test
    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    monkeypatch.setenv("QUIET_TEST_API_KEY", KEY)
    monkeypatch.chdir(write_project(tmp_path))
    return tmp_path


def _record(*flags: str, env_flags: tuple[str, ...] = ()) -> int:
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        return main(["record", ENV_REL, "--endpoint", endpoint.base_url, "--model", "scripted",
                     "--server-type", "openai", "--api-key-env", "QUIET_TEST_API_KEY", *flags,
                     "--", *PROCESS_ARGS, *env_flags])


def _log_named_in(err: str) -> Path:
    match = re.search(r"environment output: (\S+\.log)", err)
    assert match, err
    return Path(match.group(1))


def test_record_keeps_the_library_output_in_the_env_log(project: Path, capsys) -> None:
    assert _record() == 0
    out, err = capsys.readouterr()
    assert "4 rollouts recorded" in out and "next: replay it offline" in out
    for noise in LIBRARY_NOISE:
        assert noise not in out + err, noise
    log = _log_named_in(err)
    assert log.parent == Path(os.environ["HERMES_REPLAY_LOG_DIR"])  # the suite's own folder
    text = log.read_text(encoding="utf-8")
    for noise in LIBRARY_NOISE:  # all of it is in the log instead
        assert noise in text, noise
    assert KEY not in text  # the config dump's api_key was scrubbed on its way to disk
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_record_verbose_shows_the_library_output(project: Path, capsys) -> None:
    assert _record("-v") == 0
    out, err = capsys.readouterr()
    assert "APIServerConfig(" in out + err and "INFO atroposlib" in out + err
    assert "environment output:" not in err  # nothing went to a log
    assert KEY not in out + err


def test_a_crash_while_recording_shows_the_end_of_the_log(project: Path, capsys) -> None:
    assert _record(env_flags=("--env.crash_in", "setup")) == 1
    out, err = capsys.readouterr()
    assert "the environment exited with code 1" in out
    before, _, tail = err.partition("last lines of the environment output")
    assert "RuntimeError: calc env: setup failed on purpose" in tail
    for noise in LIBRARY_NOISE:  # before the quoted tail, the terminal stayed quiet
        assert noise not in out + before, noise


def test_a_fresh_replay_process_prints_only_its_own_lines(calc_project: Path) -> None:
    """What a user sees from the console script: no library line at all (transformers'
    import-time advice included), only the harness's start line, summary and table."""
    import subprocess
    import sys

    from _calc_project import CASSETTE_REL

    exe = Path(sys.executable).with_name("hermes-replay")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "hermes_replay.cli"]
    proc = subprocess.run([*cmd, "replay", ENV_REL, "--cassette", CASSETTE_REL, "--",
                           *PROCESS_ARGS], capture_output=True, text=True, timeout=300,
                          check=False, cwd=calc_project)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        line for line in proc.stderr.splitlines()
        if line.startswith(("hermes-replay replay: environment output:", "[hermes-replay] "))]
    assert "4 rollouts replayed" in proc.stdout
    for noise in (*LIBRARY_NOISE, "None of PyTorch", "Successfully generated HTML"):
        assert noise not in proc.stdout + proc.stderr, noise


def test_transformers_import_advice_stays_off_the_terminal(tmp_path: Path) -> None:
    """``check`` loads a tokenizer outside any env log; transformers' import-time advice (no
    torch installed, which the harness never needs) must not print then."""
    import subprocess
    import sys

    code = ("import os; os.environ.pop('TRANSFORMERS_NO_ADVISORY_WARNINGS', None)\n"
            "from hermes_replay.cli import main\n"
            f"main(['ls', {str(tmp_path)!r}])\n"
            "import transformers")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "None of PyTorch" not in proc.stderr


def test_old_env_logs_in_the_default_folder_are_pruned_but_a_chosen_folder_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One env log per live run would pile up in the temp folder forever: logs older than a
    week go when the next one is made there. A folder the user chose is never pruned."""
    import tempfile

    from hermes_replay._runner.log_folder import LOG_DAYS, LOG_DIR_VARIABLE, env_log_path

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    chosen = tmp_path / "artifacts"
    for folder in (tmp_path / "tmp" / f"hermes-replay-logs-{os.getuid()}", chosen):
        folder.mkdir(parents=True, mode=0o700)
        old, fresh = folder / "record-env-process-old.log", folder / "record-env-fresh.log"
        old.write_text("old\n")
        fresh.write_text("fresh\n")
        week_ago = old.stat().st_mtime - (LOG_DAYS + 1) * 86400
        os.utime(old, (week_ago, week_ago))
    monkeypatch.delenv(LOG_DIR_VARIABLE, raising=False)
    made = env_log_path("record", Path("env.py"), "process")
    default = tmp_path / "tmp" / f"hermes-replay-logs-{os.getuid()}"
    assert made.parent == default and made.is_file()
    assert sorted(p.name for p in default.iterdir()) == sorted(
        [made.name, "record-env-fresh.log"])
    monkeypatch.setenv(LOG_DIR_VARIABLE, str(chosen))
    made = env_log_path("record", Path("env.py"), "process")
    assert made.parent == chosen and (chosen / "record-env-process-old.log").is_file()
