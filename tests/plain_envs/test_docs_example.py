"""docs/plain-envs.md's example, run as written: its env file and its commands.

The page's ``python`` block is saved as the file it names, in a fresh project; its ``bash``
block's ``hermes-replay`` lines run in order through the CLI (the scripted endpoint it starts
in the background runs in-process here, on a free port substituted for the page's).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "plain-envs.md"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)


def test_the_docs_example_runs_as_written(tmp_path, monkeypatch, capsys):
    text = PAGE.read_text(encoding="utf-8")
    name = re.search(r"Save as `([\w.]+)`", text).group(1)
    (python,) = _blocks(text, "python")
    (bash,) = _blocks(text, "bash")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\nversion = '0'\n")
    (project / name).write_text(python, encoding="utf-8")
    monkeypatch.chdir(project)

    lines = [line for line in bash.splitlines() if line.strip()]
    serve = shlex.split(lines[0].rstrip("&"))
    assert serve[:2] == ["hermes-replay", "scripted-endpoint"]
    port = serve[serve.index("--port") + 1]
    script = serve[serve.index("--script") + 1]
    outputs = []
    with ScriptedEndpoint(script=script, seed=0) as endpoint:
        for line in lines[1:]:
            line = line.replace(f"127.0.0.1:{port}", f"127.0.0.1:{endpoint.port}")
            argv = shlex.split(line)
            assert argv[0] == "hermes-replay"
            code = main(argv[1:])
            out = capsys.readouterr()
            assert code == 0, (line, out.err[-3000:])
            outputs.append(out.out)
    record, listing, replay = outputs
    # the record line gives no groups path: atroposlib's default data/<name>.jsonl would land
    # in the user's repository; the recording puts it beside the env log instead
    assert not (project / "data").exists(), sorted(p.name for p in project.iterdir())
    logs = Path(os.environ["HERMES_REPLAY_LOG_DIR"])
    assert list(logs.glob(f"record-{Path(name).stem}-groups-*.jsonl"))
    assert "8 rollouts recorded · 2 turns" in record
    assert "a placeholder key is sent (held in memory, never written)" in record
    assert "8 rollouts in 2 groups" in listing
    rewards = re.findall(r"train-\w+-0-\d\s+train\s+\d+\s+\d+\s+([\d.]+)", listing)
    assert len(rewards) == 8 and len(set(rewards)) > 1  # the reward really varies
    assert "8 rollouts replayed · 2 turns · 0 misses" in replay
    # "Change the reward, replay into a folder and `hermes-replay diff CASSETTE OUT` names
    # every rollout whose reward moved": OUT as the main job writes it (one folder per
    # cassette below it), not only OUT/<cassette>
    said = re.search(r"`hermes-replay diff\s+(\S+)\s+OUT`", text)
    assert said is not None, "the page no longer shows the diff step"
    env = project / name
    env.write_text(env.read_text(encoding="utf-8").replace(
        '1.0 if "help" in text.lower() else 0.0', '0.25 if "help" in text.lower() else 0.0'),
        encoding="utf-8")
    assert main(["replay", said.group(1), "--out", "OUT", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["diff", said.group(1), "OUT"]) == 1  # rewards moved: not equal
    shown = capsys.readouterr().out
    moved = [r for r in set(rewards) if r != "0.000"]
    assert moved and "0.250" in shown, shown[-2000:]
