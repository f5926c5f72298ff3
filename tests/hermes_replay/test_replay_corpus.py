"""``hermes_replay.replay_corpus``: the main job from Python — the same rows, table, files and
exit code as ``hermes-replay replay DIR``, whichever executor runs it; a corpus that cannot run
at all raises ``CorpusError``; docs/python-api.md's example runs as written. And the runner is
one: the pytest plugin's ``replay_run`` judges a cassette as the corpus does."""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path

import pytest
from conftest import trust

from hermes_replay import (
    CassetteMiss,
    CassetteResult,
    CorpusError,
    CorpusObserver,
    RunOptions,
    load_cassette,
    replay_corpus,
    run_cassette,
)
from hermes_replay._cassette import write_cassette
from hermes_replay._session.options import OptionError
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
ENV = "terminal_test_env"
SHIPPED = ROOT / "cassettes" / ENV / "evaluate.jsonl"
PAGE = ROOT / "docs" / "python-api.md"


def _project(tmp_path: Path, *, edited: bool = True) -> Path:
    """A trusted project: the shipped env and its evaluate cassette, one copy whose recorded
    prompt was edited (it must miss), one broken file."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-project'\n")
    (tmp_path / "environments").mkdir()
    shutil.copy(ROOT / "environments" / f"{ENV}.py", tmp_path / "environments" / f"{ENV}.py")
    trust(tmp_path)
    folder = tmp_path / "cassettes"
    (folder / ENV).mkdir(parents=True)
    shutil.copy(SHIPPED, folder / ENV / "evaluate.jsonl")
    if edited:
        recorded = load_cassette(SHIPPED)
        first = recorded.interactions[0]
        first.request["body"]["messages"][-1]["content"] += " (edited)"
        first.fingerprint = ""  # recomputed from the edited body on load
        write_cassette(folder / "edited" / "evaluate.jsonl", recorded.header,
                       recorded.interactions, recorded.outcomes, recorded.tool_calls)
        broken = folder / "zz_broken" / "evaluate.jsonl"
        broken.parent.mkdir()
        broken.write_text(SHIPPED.read_text().splitlines()[0] + "\n{not json\n")
    return folder


class _Heard(CorpusObserver):
    def __init__(self) -> None:
        self.events: list[str] = []

    def started(self, count: int, workers: int, executor: str) -> None:
        self.events.append(f"started {count} {workers} {executor}")

    def cassette_done(self, result: CassetteResult) -> None:
        self.events.append(f"done {result.rel} {result.status}")

    def finished(self) -> None:
        self.events.append("finished")


def _cli_rows(text: str) -> list[tuple[str, str, str]]:
    rows = [line.split() for line in text.splitlines() if re.match(r"\S+\.jsonl\s", line)]
    return [(r[0], r[1], r[-1]) for r in rows]


@pytest.mark.slow
def test_replay_corpus_gives_the_cli_rows_files_and_exit_code(tmp_path, monkeypatch,
                                                              capsys) -> None:
    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    heard = _Heard()
    done = replay_corpus("cassettes", jobs=2, out="api-out", report=False, observer=heard)
    assert capsys.readouterr().out == ""  # the default presentation is none: it is data
    statuses = [(r.rel, r.mode, r.status) for r in done.results]
    assert statuses == [("edited/evaluate.jsonl", "evaluate", "MISS"),
                        (f"{ENV}/evaluate.jsonl", "evaluate", "ok"),
                        ("zz_broken/evaluate.jsonl", "?", "ERROR")]  # the folder's order
    assert done.exit_code == 1 and not done.ok and done.total == 3
    assert heard.events[0] == "started 3 2 local" and heard.events[-1] == "finished"
    assert sorted(heard.events[1:-1]) == sorted(f"done {r} {s}" for r, _, s in statuses)
    miss, good, broken = done.results
    assert good.summary.rollouts > 0 and good.summary.mean_reward is not None
    assert (tmp_path / "api-out" / ENV / "evaluate" / "result.json").is_file()
    assert "(edited)" in miss.message and miss.summary.misses >= 1  # the diff, from a worker
    assert "zz_broken/evaluate.jsonl:2" in broken.message
    manifest = json.loads((tmp_path / "api-out" / "replay.json").read_text())
    assert [row["rel"] for row in manifest["rows"]] == [r for r, _, _ in statuses]
    assert done.manifest.resolve() == tmp_path / "api-out" / "replay.json"
    assert [row["status"] for row in done.table()] == ["MISS", "ok", "ERROR"]

    # the command line, in this process (-j 1): the same verdicts and exit code
    code = main(["replay", "cassettes", "-j", "1", "--out", "cli-out", "--no-report"])
    cli = capsys.readouterr().out
    assert code == done.exit_code
    assert _cli_rows(cli) == [(str(r.cassette), r.mode, r.status) for r in done.results]
    api_rewards = [r.summary.mean_reward for r in done.results]
    cli_manifest = json.loads((tmp_path / "cli-out" / "replay.json").read_text())
    assert [row["summary"]["mean_reward"] for row in cli_manifest["rows"]] == api_rewards


def test_a_corpus_that_cannot_run_raises_corpus_error_naming_it(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match=r"no cassette in empty, so nothing was replayed"):
        replay_corpus("empty")
    with pytest.raises(CorpusError, match=r"nowhere does not exist") as missing:
        replay_corpus("nowhere")
    assert missing.value.exit_code == 2
    assert not (tmp_path / "replay-out").exists()  # nothing ran, nothing written
    with pytest.raises(ValueError, match="executor 'dask'"):
        replay_corpus("empty", executor="dask")
    with pytest.raises(ValueError, match="jobs=0"):
        replay_corpus("empty", jobs=0)
    with pytest.raises(OptionError, match="did you mean 'strict'"):
        replay_corpus("empty", strickt=True)


_LIVE = {"patterns": ["reward"], "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}


@pytest.mark.parametrize(("arguments", "says"), [
    ({"shard": 3}, "shard=3: give \"I/N\""),  # AttributeError: 'int' … 'count'
    ({"shard": "3/2"}, "I must be between 1 and N"),
    ({"observer": 1}, "observer=1: give an instance of a CorpusObserver subclass"),
    ({"out": "a-file"}, "a-file is a file"),  # an OSError once the run had ended
    ({"out": "a-file/below"}, "a-file is a file, so a-file/below cannot be made"),
    ({"out": 7}, "out=7: give a folder's path"),
    ({"fail_on_change": "no"}, "fail_on_change must be True or False, not 'no'"),
    ({"report": "no"}, "report must be True or False, not 'no'"),
    ({"verbose": "no"}, "verbose must be True or False, not 'no'"),
    ({"ray_upload": 1}, "ray_upload must be True or False, not 1"),
    ({"rescore": -1, "live": _LIVE}, "rescore=-1: give a whole number of 1 or more"),
    ({"rescore": 0}, "rescore=0: give a whole number of 1 or more"),
    ({"rescore": True, "live": _LIVE}, "rescore=True: give a whole number"),
    ({"rescore": 2}, "rescore=2 goes with live=…"),
    ({"ray_address": 5}, "ray_address=5: give the cluster's address as a string"),
    ({"executor": ["local"]}, "executor ['local'] is not one of local, ray"),
])
def test_an_argument_of_the_wrong_shape_is_a_corpus_error_naming_it(
        tmp_path, monkeypatch, arguments, says) -> None:
    """Trust round 5, finding 09: every argument of the public ``replay_corpus`` is checked
    before anything runs; a wrong one is a ``CorpusError`` (and a ``ValueError``) naming it
    and what it takes — before: ``AttributeError``, ``OSError``, ``"no"`` taken as true, a
    bare ``AssertionError``."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(SHIPPED, tmp_path / "evaluate.jsonl")
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(CorpusError, match=re.escape(says)) as caught:
        replay_corpus("evaluate.jsonl", jobs=1, **{"out": "o", **arguments})
    assert isinstance(caught.value, ValueError) and caught.value.exit_code == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "replay-out").exists()


def test_replay_out_a_file_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    """Trust round 5, finding 08: ``replay --out FILE`` (and a folder below a file) ended in a
    ``FileExistsError`` / ``NotADirectoryError`` traceback after the run."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(SHIPPED, tmp_path / "evaluate.jsonl")
    (tmp_path / "a-file").write_text("not a folder")
    for argv in (["--out", "a-file", "--no-report"], ["--out", "a-file/below", "--no-report"],
                 ["--out", "a-file", "--twice"]):
        assert main(["replay", "evaluate.jsonl", *argv]) == 2
        err = capsys.readouterr().err
        assert "the output folder" in err and "a-file is a file" in err, err
        assert "Next step: pass another --out" in err and "Traceback" not in err
    assert (tmp_path / "a-file").read_text() == "not a folder"


@pytest.mark.slow
def test_the_docs_example_runs_as_written(tmp_path, monkeypatch, capsys) -> None:
    _project(tmp_path, edited=False)
    monkeypatch.chdir(tmp_path)
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    exec(compile(code, str(PAGE), "exec"), {})  # the page's own example
    out = capsys.readouterr().out
    assert re.search(rf"^ok\s+cassettes/{ENV}/evaluate.jsonl\s+mean reward \d", out, re.M), out
    assert "exit code 0" in out
    assert (tmp_path / "replay-out" / "nightly" / "replay.json").is_file()


# --------------------------------------------------------------------------- RunOptions


def test_run_options_are_one_checked_value() -> None:
    options = RunOptions(strict=True, ignore_paths=["body.metadata"], normalizers=["uuid"],
                         tool_overrides={"web_search": "execute"}, session={"drop_unrun": True})
    assert options.ignore_paths == ("body.metadata",) and options.normalizers == ("uuid",)
    assert pickle.loads(pickle.dumps(options)) == options  # it crosses to workers and actors
    assert options.session_options() == {
        "strict": True, "tools": "replay", "drop_unrun": True,
        "tool_overrides": {"web_search": "execute"}, "ignore_paths": ["body.metadata"],
        "normalizers": ["uuid"]}
    laid = RunOptions.of(options, seed=3, worker="w1")  # a field, and a session option
    assert (laid.seed, laid.session["worker"], laid.strict) == (3, "w1", True)
    assert options.replace(strict=False).strict is False and options.strict is True
    with pytest.raises(AttributeError):
        options.strict = False  # type: ignore[misc]


@pytest.mark.parametrize(("keywords", "message"), [
    ({"strickt": True}, "did you mean 'strict'"),
    ({"trust_cassette": "no"}, "trust_cassette must be True or False"),
    ({"ignore_paths": "body.metadata"}, "ignore_paths must be a list of strings"),
    ({"tools": "run"}, "unknown tool policy 'run'"),
    ({"mode": "replai"}, "mode 'replai' is not one of"),
    ({"max_misses": -1}, "max_misses must be a whole number"),
    ({"seed": "7"}, "seed must be a whole number or None"),
])
def test_a_bad_option_is_refused_before_anything_runs(tmp_path, keywords, message) -> None:
    with pytest.raises(OptionError, match=message) as caught:
        run_cassette(tmp_path / "not-even-there.jsonl", out_dir=tmp_path / "out", **keywords)
    assert str(caught.value).startswith("run_cassette(): ")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- one runner


@pytest.mark.slow
def test_the_plugin_judges_a_cassette_as_the_corpus_does(tmp_path, monkeypatch,
                                                         replay_run) -> None:
    folder = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    edited = folder / "edited" / "evaluate.jsonl"
    with pytest.raises(CassetteMiss) as caught:
        replay_run(edited)
    assert "pytest --replay-mode auto" in str(caught.value)  # the plugin's own next step
    (row,) = replay_corpus(edited, jobs=1, out="corpus-out", report=False).results
    assert row.status == "MISS" and row.summary.misses == len(caught.value.misses)
    plugin_result = tmp_path / "run-1" / "result.json"  # replay_run's folder for its 1st run
    corpus_result = tmp_path / "corpus-out" / "evaluate" / "result.json"
    misses = [json.loads(p.read_text())["misses"] for p in (plugin_result, corpus_result)]
    assert misses[0] == misses[1] and misses[0]  # the same runner wrote both
    # the documented opt-out: the run's error handed back, not raised
    quiet = replay_run(edited, raise_errors=False)
    assert isinstance(quiet.error, CassetteMiss)
    assert len(quiet.misses) == len(caught.value.misses)
