"""Runs are quiet by default: the environment's own output — atroposlib's config dump, its INFO
lines and UserWarnings — goes to the env log, ``-v`` puts it on the terminal, and a crash shows
the end of the log. Through ``hermes-replay record`` with a real env (the calc env, a user env
on the project's base class) against the scripted endpoint.
"""

from __future__ import annotations

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
