"""What a failed recording says (issue 45, item 5).

- An endpoint that refused the env's requests (HTTP 4xx) is named in ``record``'s failure with
  the status and the endpoint's reason, even when the env swallowed the errors and the run
  stopped on empty groups; the scripted endpoint logs each unmatched request, naming the role
  no rule reads.
- A failed recording names no ``.partial`` that does not exist.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from _plain_script import _sum

from hermes_replay import bundled_tokenizer_path
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import Rule, Script, ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def _sums_only() -> Script:
    """A script with no catch-all: a request no rule reads is answered 422."""
    return Script("sums-only", [Rule("sum", lambda c: "+" in c.last_user_text, _sum)])


def _record(env: str, cassette: Path, endpoint_url: str, *extra: str) -> int:
    here = Path.cwd()
    os.chdir(HERE)
    try:
        return main(["record", env, "--cassette", str(cassette), "--endpoint", endpoint_url,
                     "--model", "scripted", "--", "process", "--env.tokenizer_name",
                     str(bundled_tokenizer_path()), *extra])
    finally:
        os.chdir(here)
        import wandb

        if wandb.run is not None:
            wandb.finish()


def test_a_refused_request_is_named_with_its_status_and_reason(tmp_path, capsys, monkeypatch,
                                                               caplog):
    monkeypatch.setenv("HERMES_REPLAY_MAX_EMPTY_GROUPS", "2")
    cassette = tmp_path / "human.jsonl"
    with caplog.at_level(logging.WARNING, logger="hermes_replay.scripted_endpoint"), \
            ScriptedEndpoint(script=_sums_only(), seed=0) as endpoint:
        code = _record("human_role_env.py", cassette, endpoint.base_url)
        unmatched = list(endpoint.unmatched)
    err = " ".join(capsys.readouterr().err.split())
    assert code != 0
    # the stand-in said why, and logged it
    assert unmatched and "message 0 has role 'human', which no rule reads" in unmatched[0]
    assert any("role 'human'" in r.getMessage() for r in caplog.records)
    # record's failure names the refusal first: status, count, the endpoint's reason
    assert "the endpoint refused" in err and "with HTTP 422" in err, err[-3000:]
    assert "message 0 has role 'human', which no rule reads" in err
    assert err.index("the endpoint refused") < err.index("returned no group")
    # the refusals were recorded (a 4xx is an answer): a .partial named is there
    assert f"{cassette}.partial" not in err or Path(f"{cassette}.partial").exists()


def test_a_failed_recording_names_no_partial_that_does_not_exist(tmp_path, capsys):
    cassette = tmp_path / "crashed.jsonl"
    assert not (HERE / "sums_config.json").exists()  # its setup() fails before any request
    with ScriptedEndpoint(script=_sums_only(), seed=0) as endpoint:
        code = _record("relative_config_env.py", cassette, endpoint.base_url)
    said = capsys.readouterr()
    err = " ".join((said.out + said.err).split())
    assert code != 0
    assert "the environment exited with code 1" in err, err[-2000:]
    assert not Path(f"{cassette}.partial").exists()
    assert ".partial" not in err, err[-2000:]
    assert "nothing was recorded, so no partial recording was kept" in err
