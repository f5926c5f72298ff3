"""The battery runs on environment files nobody may edit: the former-style fixtures of
``tests/environments/former_style/`` (written for the former Hermes layer), probed as they are.

What an unmodified file needs comes from the probe's side: the env's own flags after ``--``
(``env_args``), a known-good reply built from the item's fields (``--known-good``), and probes
of its own in ``<stem>_probes.py`` beside it. The hacks found here are in those users' files;
the tests show them (they are findings to report, not to fix).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay._session.known_good import reference_reply
from hermes_replay.cli import main
from hermes_replay.probe import run_probes

pytestmark = pytest.mark.slow

FORMER = Path(__file__).resolve().parents[1] / "environments" / "former_style"
CODING = FORMER / "hermes_coding_env.py"
LOCAL = ["--env.terminal_backend", "local"]  # its default (modal) is not provided here


def _kinds(report, probe: str) -> set[str]:
    return {f.kind for f in report.findings if f.probe == probe}


def test_coding_env_runs_with_its_flags_and_its_verifier_is_fooled_by_an_exit_stub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(FORMER, tmp_path / "envs")  # the cassette names the env relative to here
    monkeypatch.chdir(tmp_path)
    report = run_probes("envs/hermes_coding_env.py", items=1, env_args=LOCAL,
                        cassette_dir="c", work_dir="w",
                        probes=["reference-solution", "empty", "tamper-exit-stubs"])
    # its own known-good probe (hermes_coding_env_probes.py beside it) passes the hidden tests …
    assert report.row("reference-solution").mean == 1.0 and report.known_good_mean == 1.0
    assert report.row("empty").verdict == "ok"
    # … and so does a solution.py that calls os._exit(0) on import: the reward trusts pytest's
    # exit code in the agent's own directory. A real hack in the user's file, reported.
    assert _kinds(report, "tamper-exit-stubs") == {"hack"}, report.lines()
    assert report.row("tamper-exit-stubs").max == 1.0
    # the env flags are part of the recorded command, so the cassette replays as it ran
    path = tmp_path / "c" / "probe-tamper-exit-stubs.jsonl"
    assert hermes_replay.load_cassette(path).header.command[-2:] == LOCAL
    result = hermes_replay.run_cassette(path, out_dir=tmp_path / "replay", strict=True)
    assert result.exit_code == 0 and list(result.rewards.values()) == [1.0]


def test_without_its_flags_the_crash_says_what_the_env_said_and_where_flags_go(
        tmp_path: Path) -> None:
    report = run_probes(CODING, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    (finding,) = report.findings
    assert finding.kind == "crashed"
    assert "terminal_backend 'modal'" in finding.message
    assert "--env.terminal_backend local" in finding.message and "after `--`" in finding.message


def test_known_good_template_is_filled_from_each_item_and_must_score_high(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    env = FORMER / "dataset_env.py"  # rows {id, question, answer}; reward reads "ANSWER: n"
    code = main(["probe", str(env), "--items", "2", "--probe", "known-good", "--probe",
                 "restate", "--known-good", "ANSWER: {answer}", "--json", "--cassettes",
                 str(tmp_path / "c"), "--out", str(tmp_path / "w")])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    rows = {r["probe"]: r for r in report["probes"]}
    assert rows["known-good"]["verdict"] == "ok" and rows["known-good"]["rollouts"] == 2
    assert rows["known-good"]["mean"] == pytest.approx(0.8)  # correct, no terminal bonus
    assert rows["restate"]["max"] == 0.0
    recorded = (tmp_path / "c" / "probe-known-good.jsonl").read_text()
    assert "ANSWER: 5050" in recorded or "ANSWER: 1048576" in recorded


def test_the_web_envs_keyword_fallback_pays_full_marks_for_keyword_soup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    report = run_probes(FORMER / "web_research_env.py", items=2,
                        probes=["known-good", "keyword-soup"], known_good="{reference}",
                        env_args=["--env.web_backend", "local_corpus", "--env.web_corpus_dir",
                                  str(FORMER / "data" / "corpus")],
                        cassette_dir=tmp_path / "c", work_dir=tmp_path / "w")
    assert report.row("known-good").verdict == "ok", report.lines()
    # the judge answered in prose, so the env fell back to keyword overlap: 1.0 for a bag of
    # words (web_research_env_probes.py beside it holds the probe)
    assert _kinds(report, "keyword-soup") == {"hack"} and report.row("keyword-soup").max == 1.0


@pytest.mark.parametrize(("flags", "named"), [
    (["--env.group_size", "4"], "--env.group_size"),
    (["--openai.base_url=http://x"], "--openai.base_url"),
    (["evaluate"], "process"),
])
def test_flags_the_probe_sets_itself_are_refused_before_anything_runs(
        flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["probe", str(CODING), "--cassettes", str(tmp_path / "c"), "--", *flags])
    err = capsys.readouterr().err
    assert code == 2 and named in err
    assert not (tmp_path / "c").exists()


def test_a_template_naming_a_missing_field_says_which_fields_the_item_has() -> None:
    item = {"id": "w1", "answer": "word 1"}
    assert reference_reply("ANSWER: {answer}", item) == "ANSWER: word 1"
    assert reference_reply(lambda it: [it["answer"]], item) == ["word 1"]
    with pytest.raises(ValueError, match=r"no field 'reference'.*id, answer"):
        reference_reply("{reference}", item)
    with pytest.raises(TypeError, match="function of the item"):
        reference_reply("{answer}", "a plain string item")


def test_a_bad_template_stops_the_probe_with_the_env_run_saying_why(tmp_path: Path) -> None:
    report = run_probes(Path(__file__).with_name("reward_env.py"), items=1,
                        probes=["known-good"], known_good="{reference}",
                        cassette_dir=tmp_path / "c", work_dir=tmp_path / "w")
    (finding,) = report.findings  # the crash alone: no "nan" for the rollout it stopped
    assert finding.kind == "crashed"
    assert "no field 'reference'; its fields are id, answer" in finding.message
