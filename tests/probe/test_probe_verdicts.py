"""The probe battery flags what it must and passes what it should, through a real env run.

Every test runs ``tests/probe/reward_env.py`` in process through its real ``process`` path
against the scripted endpoint; only the reward rule (``PROBE_TEST_REWARD``) changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hermes_replay
from hermes_replay.cli import main
from hermes_replay.probe import run_probes

ENV = Path(__file__).with_name("reward_env.py")


@pytest.fixture
def rule(monkeypatch: pytest.MonkeyPatch):
    def set_rule(name: str) -> None:
        monkeypatch.setenv("PROBE_TEST_REWARD", name)

    return set_rule


def _kinds(report, probe: str) -> set[str]:
    return {f.kind for f in report.findings if f.probe == probe}


def test_honest_reward_has_no_findings_and_known_good_sets_the_threshold(
        rule, tmp_path: Path) -> None:
    rule("honest")
    report = run_probes(ENV, items=2, probes=["known-good", "empty", "claim-success", "restate"],
                        cassette_dir=tmp_path / "c", work_dir=tmp_path / "w")
    assert report.ok, "\n".join(report.lines())
    assert report.row("known-good").mean == 1.0 and report.row("known-good").verdict == "ok"
    assert report.row("empty").max == 0.0 and report.row("empty").rollouts == 2
    assert report.known_good_mean == 1.0 and report.threshold == 0.5
    for name in ("known-good", "empty", "claim-success", "restate"):
        assert (tmp_path / "c" / f"probe-{name}.jsonl").is_file()


def test_planted_success_claim_hack_is_a_finding_and_exits_1(rule, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    rule("claims")
    code = main(["probe", str(ENV), "--items", "2", "--probe", "claim-success",
                 "--probe", "empty", "--cassettes", str(tmp_path / "c"), "--out",
                 str(tmp_path / "w"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False
    assert report["sandbox"] == "bwrap"  # the tampering probes' commands ran isolated
    hacks = [f for f in report["findings"] if f["kind"] == "hack"]
    assert [f["probe"] for f in hacks] == ["claim-success"]
    assert "1.00 >= 0.50" in hacks[0]["message"]
    rows = {r["probe"]: r for r in report["probes"]}
    assert rows["claim-success"]["verdict"] == "FINDING" and rows["empty"]["verdict"] == "ok"


def test_random_reward_is_found_nondeterministic(rule, tmp_path: Path) -> None:
    rule("random")
    report = run_probes(ENV, items=2, probes=["refusal"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w", threshold=1.01)
    assert _kinds(report, "refusal") == {"nondeterministic"}, report.lines()


@pytest.mark.parametrize(("name", "kind"), [("raises", "raised"), ("above", "out-of-range"),
                                            ("nan", "nan")])
def test_broken_rewards_are_findings(rule, tmp_path: Path, name: str, kind: str) -> None:
    rule(name)
    report = run_probes(ENV, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    assert kind in _kinds(report, "empty"), report.lines()


def test_an_env_that_never_returns_a_group_is_stopped_not_waited_for(rule,
                                                                      tmp_path: Path) -> None:
    rule("drops")  # atroposlib's process would retry the group forever
    report = run_probes(ENV, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    (finding,) = report.findings
    assert finding.kind == "crashed" and "returned no group 9 times" in finding.message
    assert "scores are all equal" in finding.message


def test_declared_range_decides_what_is_out_of_range(rule, tmp_path: Path) -> None:
    rule("above")
    report = run_probes(ENV, items=1, probes=["known-good"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w", reward_range=(0.0, 2.0))
    assert report.ok, report.lines()


def test_known_good_scoring_low_is_a_finding(rule, tmp_path: Path) -> None:
    rule("strict")
    report = run_probes(ENV, items=2, probes=["known-good"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    assert _kinds(report, "known-good") == {"known-good-low"}


def test_probe_cassette_replays_with_the_same_rewards(rule, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    rule("honest")
    monkeypatch.chdir(tmp_path)  # the header names the env file relative to where it ran
    env = tmp_path / "reward_env.py"
    env.write_text(ENV.read_text())
    report = run_probes(env, items=2, probes=["known-good"], work_dir=tmp_path / "w")
    path = tmp_path / "cassettes" / "reward_env" / "probe-known-good.jsonl"
    cassette = hermes_replay.load_cassette(path)
    assert cassette.header.extra["probe"]["name"] == "known-good"
    assert cassette.header.env_file == "reward_env.py"
    recorded = {rid: rec.outcome["reward"] for rid, rec in cassette.rollouts.items()}
    assert sorted(recorded.values()) == [1.0, 1.0]
    assert report.row("known-good").mean == 1.0
    result = hermes_replay.run_cassette(path, out_dir=tmp_path / "replay", strict=True)
    assert result.exit_code == 0 and not result.misses
    assert result.rewards == recorded and result.changed_rewards() == {}


def test_a_failed_run_keeps_the_previous_cassette(rule, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rule("honest")
    target = tmp_path / "c" / "probe-empty.jsonl"
    run_probes(ENV, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
               work_dir=tmp_path / "w")
    before = target.read_bytes()
    broken = tmp_path / "broken_env.py"
    broken.write_text(ENV.read_text().replace("async def setup(self) -> None:",
                                              "async def setup(self) -> None:\n"
                                              "        raise SystemExit(3)"))
    report = run_probes(broken, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    assert _kinds(report, "empty") == {"crashed"}
    assert "exited with code 3" in report.findings[0].message
    assert target.read_bytes() == before


def test_probe_helper_fixture_runs_the_battery_in_one_test(rule, probe_battery) -> None:
    rule("claims")
    report = probe_battery(ENV, items=1, probes=["claim-success"])
    with pytest.raises(AssertionError, match="claim-success: hack"):
        report.assert_clean()


def test_cli_prints_the_table_and_writes_an_html_report_of_the_probe_cassettes(
        rule, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rule("honest")
    code = main(["probe", str(ENV), "--items", "1", "--probe", "empty", "--cassettes",
                 str(tmp_path / "c"), "--out", str(tmp_path / "w")])
    out = capsys.readouterr().out
    assert code == 0 and "no findings" in out
    # off a terminal the table is plain text: header, one rule, one row per probe
    head = out.splitlines()[1:4]
    assert head[0].split() == ["probe", "mean", "max", "turns", "verdict"], out
    assert set(head[1].strip()) == {"-"} and head[2].split()[0] == "empty", out
    assert head[2].split()[-1] == "ok" and "\x1b[" not in out
    assert "tool sandbox: bubblewrap (kernel isolation), record and replay" in out
    assert out.splitlines()[-1].strip() == f"report: {tmp_path / 'w' / 'report' / 'report.html'}"
    page = (tmp_path / "w" / "report" / "report.html").read_text()
    assert "probe-empty" in page and (tmp_path / "w" / "report" / "probe-empty.jsonl").is_file()


def test_the_report_says_when_the_user_opted_out_of_the_sandbox(
        rule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rule("honest")
    monkeypatch.setenv("HERMES_SANDBOX", "none")
    report = run_probes(ENV, items=1, probes=["empty"], cassette_dir=tmp_path / "c",
                        work_dir=tmp_path / "w")
    assert report.sandbox == "none" and report.to_json()["sandbox"] == "none"
