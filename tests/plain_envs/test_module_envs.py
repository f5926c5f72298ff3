"""Community envs as Atropos runs them: ``python -m environments.community.x.y`` from the root.

Atropos keeps community environments in namespace packages (``environments/`` has no
``__init__.py``) and its READMEs run them as modules from the repository root; their helpers
are imported relatively. ``namespace_checkout/`` is a miniature of such a checkout. The env is
given to ``record`` as a module (``-m`` or the dotted name) or as its file, the header keeps the
module, and replay finds and runs it again as a module from any folder of the checkout — and
the checkout's ``environments`` namespace merges with the Hermes layer's instead of being
shadowed by it (issue 35, items 2 and 3).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _plain_script import plain_script

from hermes_replay import bundled_tokenizer_path, load_cassette, run_cassette
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

HERE = Path(__file__).resolve().parent
MODULE = "environments.community.word_sums.word_sums_env"
FILE = "environments/community/word_sums/word_sums_env.py"


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "atropos"
    shutil.copytree(HERE / "namespace_checkout", root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text("[project]\nname = 'atroposlib'\nversion = '0'\n",
                                         encoding="utf-8")
    (root / ".git").mkdir()
    monkeypatch.chdir(root)
    yield root
    import wandb

    if wandb.run is not None:
        wandb.finish()


def _record(env: list[str], cassette: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedEndpoint(script=plain_script(), seed=0) as endpoint:
        code = main(["record", *env, "--cassette", str(cassette), "--endpoint",
                     endpoint.base_url, "--model", "scripted", "--server-type", "openai",
                     "--seed", "3", "--", "process",
                     "--env.tokenizer_name", str(bundled_tokenizer_path()),
                     "--env.total_steps", "2", "--env.group_size", "4",
                     "--env.data_path_to_save_groups", "data/groups.jsonl"])
    output = capsys.readouterr()
    assert code == 0, output.err[-4000:] + output.out[-2000:]


@pytest.mark.parametrize("given", ["-m", "dotted-name", "file"])
def test_a_namespace_package_env_records_and_replays_as_python_m_runs_it(
        checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    env = {"-m": ["-m", MODULE], "dotted-name": [MODULE], "file": [FILE]}[given]
    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(env, cassette, capsys)
    header = load_cassette(cassette).header
    assert header.env_file == FILE
    assert header.extra.get("env_module") == MODULE
    assert main(["replay", str(cassette.relative_to(checkout)), "--out",
                 str(tmp_path / "out-root")]) == 0, capsys.readouterr()
    assert "8 rollouts replayed" in capsys.readouterr().out
    # from another folder of the checkout, through the pytest plugin's path
    monkeypatch.chdir(checkout / "environments" / "community")
    result = run_cassette(cassette, out_dir=tmp_path / "out-sub")
    assert result.error is None and len(result.rollouts) == 8
    rewards = {r.reward for r in result.rollouts}
    assert rewards <= {1.0, -0.5} and len(rewards) == 2, rewards  # scored by .scoring


def test_a_module_that_is_not_there_names_where_it_looked(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "-m", "environments.community.nope.env", "--endpoint",
                 "http://127.0.0.1:9/v1", "--model", "m", "--", "process"]) == 2
    err = capsys.readouterr().err
    assert "no module environments.community.nope.env found from" in err
    assert "environments/community/nope/env.py" in err


def test_a_recorded_module_must_be_the_env_files_own(checkout: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A cassette is data: an ``env_module`` that is not the env file's own module path is
    ignored (the file then runs as its own package layout says), never imported."""
    from hermes_replay._runner.plan import recorded_module

    env = checkout / FILE
    assert recorded_module(env, checkout, {"env_module": MODULE}) == (MODULE, checkout)
    for other in ("os", "environments.community.word_sums.scoring", "x" * 300, 7, ""):
        assert recorded_module(env, checkout, {"env_module": other}) is None, other


def test_the_checkout_namespace_merges_with_the_layer(checkout: Path) -> None:
    """``python -m`` from the checkout root sees its own ``environments.community`` and the
    installed layer's ``environments.agent_loop`` side by side (the layer is a namespace
    portion, not a regular package that would shadow the checkout)."""
    probe = ("import environments.community.word_sums.scoring as s, "
             "environments.agent_loop as a; print(s.__file__); print(a.__file__)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=checkout, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    mine, layer = done.stdout.split()
    assert Path(mine).is_relative_to(checkout)
    assert Path(layer).name == "agent_loop.py" and not Path(layer).is_relative_to(checkout)


def test_watch_learns_the_modules_a_package_env_imports_relatively(
        checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``watch`` replays a cassette when a file its last run imported is saved; the env's
    ``from .scoring import …`` module is forgotten when the run ends (so the next run
    imports today's file) and must still count as imported."""
    import os

    from hermes_replay import RunOptions
    from hermes_replay._corpus.watch_run import replay_in_child

    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(["-m", MODULE], cassette, capsys)
    replayed = replay_in_child(str(cassette), str(tmp_path / "out"), str(checkout),
                               dict(os.environ), [str(checkout)], RunOptions())
    assert replayed.summary.error is None, replayed.printed[-2000:]
    imported = {Path(p).name for p in replayed.imported}
    assert "scoring.py" in imported, imported  # (the env file itself: from the header)


def test_replay_env_with_cassette_uses_the_recorded_tokenizer(
        checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay ENV --cassette C -- process …`` without ``--env.tokenizer_name``: the env's
    own default is a hub name (offline: not there); the recording's tokenizer is used."""
    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(["-m", MODULE], cassette, capsys)
    code = main(["replay", "-m", MODULE, "--cassette", str(cassette), "--", "process",
                 "--env.total_steps", "2", "--env.group_size", "4",
                 "--env.data_path_to_save_groups", str(tmp_path / "groups.jsonl")])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:] + captured.out[-2000:]
    assert "8 rollouts replayed" in captured.out


def test_progress_counts_the_rollouts_the_summary_counts(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An ``n>1`` group is one request (the group's traffic) and one group record beside its
    rollouts: the progress total ("0/N rollouts") counts only the rollouts, as the summary."""
    import hermes_replay

    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(["-m", MODULE], cassette, capsys)
    events: list = []
    with hermes_replay.cassette(cassette, mode="replay", on_event=events.append):
        pass
    loaded = [e for e in events if e.kind == "loaded"]
    assert [e.seq for e in loaded] == [8]  # 2 groups x 4 choices, not 8 + 2 groups + traffic


def test_a_moved_reward_in_a_snapshot_shows_the_rollouts_own_reply(
        checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35, item 4: the snapshot says which rollout of an ``n > 1`` group moved, and now
    why — the reply that earned it is that rollout's own sample, not the group's first."""
    from types import SimpleNamespace

    from hermes_replay.snapshot import RolloutSnapshotExtension, failed_reward_snapshots

    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(["-m", MODULE], cassette, capsys)
    result = run_cassette(cassette, out_dir=tmp_path / "out")
    text = RolloutSnapshotExtension().serialize(result)
    recorded = load_cassette(cassette)
    picked = next(rid for rid, rec in recorded.rollouts.items()
                  if rec.outcome.get("choice") == 2)
    group = recorded.rollouts[recorded.rollouts[picked].outcome["traffic"]]
    choices = group.interactions[-1].response["body"]["choices"]
    own, first = choices[2]["message"]["content"], choices[0]["message"]["content"]
    assert own != first
    # the stored snapshot had another reward for that rollout
    old = "\n".join(line.replace(line.split()[1], "0.1234", 1)
                    if line.strip().startswith(picked + " ") else line
                    for line in text.splitlines())
    fake = SimpleNamespace(_execution_results={0: SimpleNamespace(
        success=False, asserted_data=text, recalled_data=old)})
    (lines,) = failed_reward_snapshots(fake)
    shown = "\n".join(lines)
    assert picked in shown and "0.1234 →" in shown, shown
    assert f"its reply: {' '.join(own.split())[:60]}" in shown, shown


def test_check_takes_a_module_env_and_runs_it_as_that_module(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``check -m …``: the import row imports the module (its relative import works), and the
    process and one-process rerun rows run it as ``python -m`` would; the cassettes are found
    under ``cassettes/<env>/`` by themselves."""
    cassette = checkout / "cassettes" / "word_sums_env" / "process.jsonl"
    _record(["-m", MODULE], cassette, capsys)
    code = main(["check", "-m", MODULE])
    out = capsys.readouterr().out
    for rule in ("import", "process", "rerun", "rewards"):
        assert re.search(rf"pass\s+{rule}\s", out), out[-4000:]
    assert code == 0, out[-4000:]
