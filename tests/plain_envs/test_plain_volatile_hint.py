"""A volatile hint only for values that vary (issue 45, item 4).

``record`` proposes a built-in normalizer for dates, weekdays, uuids… in the requests an env
built. Words of the dataset's own questions — "On Monday …", "Friday, 5 January 2024" — are the
item's text, the same in every run: they are never proposed. Today's weekday in the system
prompt is, in the same env, with the same words.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def _record(tmp_path: Path, capsys, *extra: str) -> str:
    here = Path.cwd()
    os.chdir(HERE)
    try:
        with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
            code = main(["record", "weekday_question_env.py", "--cassette",
                         str(tmp_path / "c.jsonl"), "--endpoint", endpoint.base_url, "--model",
                         "scripted", "--", "process", "--env.tokenizer_name",
                         str(bundled_tokenizer_path()), "--env.data_path_to_save_groups",
                         str(tmp_path / "groups.jsonl"), *extra])
    finally:
        os.chdir(here)
        import wandb

        if wandb.run is not None:
            wandb.finish()
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return out


def test_weekdays_in_the_question_are_not_proposed(tmp_path, capsys):
    out = _record(tmp_path, capsys)
    assert "Monday" not in out and "Friday" not in out
    assert "volatile values" not in out, out[-2000:]


def test_todays_weekday_in_the_prompt_still_is(tmp_path, capsys):
    out = _record(tmp_path, capsys, "--env.clock_in_prompt", "True")
    assert "volatile values" in out, out[-2000:]
    (line,) = [x for x in out.splitlines() if x.strip().startswith("datetime")]
    assert "body.messages[0].content" in line  # the system prompt's, not the question's
    assert repr(datetime.date.today().strftime("%A")) in line
