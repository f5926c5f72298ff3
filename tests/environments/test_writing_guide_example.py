"""docs/writing-environments.md's example env, saved as the page shows it, recorded against the
scripted endpoint and replayed as its command block says; `ls` names the item (fib_20)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-environments.md"


def test_the_guides_env_records_lists_its_items_and_replays(tmp_path, monkeypatch, capsys):
    text = PAGE.read_text(encoding="utf-8")
    python = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    bash = re.findall(r"```bash\n(.*?)```", text, re.S)[0].replace("\\\n", " ")
    commands = [shlex.split(line.split("#")[0]) for line in bash.splitlines() if line.strip()]
    project = tmp_path / "project"
    (project / "environments").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\nversion = '0'\n")
    (project / "environments" / "my_env.py").write_text(python, encoding="utf-8")
    monkeypatch.chdir(project)
    by_verb = {c[1]: c for c in commands if c[0] == "hermes-replay"}
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        record = [a.replace("http://127.0.0.1:8001/v1", endpoint.base_url)
                  for a in by_verb["record"][1:]]
        assert main(record) == 0, capsys.readouterr().err[-3000:]
    capsys.readouterr()
    assert main(by_verb["ls"][1:]) == 0
    listing = capsys.readouterr().out
    rows = [line for line in listing.splitlines() if line.strip().startswith("train-")]
    assert rows and all(line.split()[1] == "fib_20" for line in rows), listing
    assert main([*by_verb["replay"][1:], "--out", "out", "--no-report"]) == 0
    assert "0 misses" in capsys.readouterr().out
