"""A baseline that moves: replay and watch compare with the accepted rewards, say which, and
``watch``'s accept key makes the current rewards the baseline.

The accepted snapshot is written the way the pytest extension writes it (``render_run`` of a
replay of the cassette with the changed reward). The expected rewards are computed here from
the recorded ones and the edit (``0.5 + …`` became ``0.25 + …``: every reward 0.25 lower).
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from hermes_replay import load_cassette, run_cassette
from hermes_replay._corpus.baseline import find_baseline
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._corpus.watch_accept import Acceptance, KeyReader
from hermes_replay.cli import main
from hermes_replay.snapshot import render_run

CASSETTE = Path("cassettes/calc_tool_env/process.jsonl")
ENV = Path("environments/calc_tool_env.py")
REWARD = "reward = 0.5 + 0.5 * called - 0.1 * len(result.tool_errors)"
SNAPSHOT = Path("tests/__snapshots__/test_calc/test_rewards.rollouts.txt")
_CHANGE = re.compile(r"reward changed (\S+)(?: \([^)]*\))?: (-?[\d.]+) -> (-?[\d.]+)")


def _edit_reward(root: Path, new: str) -> None:
    path = root / ENV
    text = path.read_text(encoding="utf-8")
    start = text.index("reward = ")
    end = text.index("\n", start)
    path.write_text(text[:start] + new + text[end:], encoding="utf-8")


def _recorded(root: Path) -> dict[str, float]:
    return {rid: float(rec.outcome["reward"])
            for rid, rec in load_cassette(root / CASSETTE).rollouts.items()}


def _replay(capsys, out: Path) -> tuple[int, str]:
    code = main(["replay", str(CASSETTE), "--out", str(out), "--no-report", "-j", "1"])
    return code, capsys.readouterr().out


def test_replay_compares_with_the_accepted_snapshot_and_says_so(calc_project, tmp_path, capsys):
    recorded = _recorded(calc_project)
    _edit_reward(calc_project, REWARD.replace("0.5 + 0.5", "0.25 + 0.5"))
    accepted = run_cassette(CASSETTE, out_dir=tmp_path / "accepting", raise_errors=False)
    assert accepted.rewards == pytest.approx({r: v - 0.25 for r, v in recorded.items()})
    (calc_project / SNAPSHOT).parent.mkdir(parents=True)
    (calc_project / SNAPSHOT).write_text(render_run(accepted), encoding="utf-8")

    code, out = _replay(capsys, tmp_path / "a")
    assert code == 0
    assert "reward changed" not in out  # accepted: not shown as new
    assert f"rewards compared with the accepted snapshot {SNAPSHOT.as_posix()}; 4 reward(s) " \
           "differ from the recording, accepted there" in out

    # a new change shows against the snapshot (0.25 lower than accepted), not the recording
    _edit_reward(calc_project, REWARD.replace("0.5 + 0.5", "0.0 + 0.5"))
    code, out = _replay(capsys, tmp_path / "b")
    moved = {m[1]: (float(m[2]), float(m[3])) for m in _CHANGE.finditer(out)}
    assert moved.keys() == recorded.keys()
    for rid, (old, new) in moved.items():
        assert old == pytest.approx(recorded[rid] - 0.25, abs=1e-3)
        assert new == pytest.approx(recorded[rid] - 0.5, abs=1e-3)


def test_snapshots_that_disagree_are_not_guessed_between(calc_project, tmp_path):
    recorded = _recorded(calc_project)
    rid = sorted(recorded)[0]
    one = tmp_path / "__snapshots__" / "a.rollouts.txt"
    two = tmp_path / "__snapshots__" / "b.rollouts.txt"
    one.parent.mkdir()
    head = "# hermes-replay rollout snapshot v1\nenv: calc\n\nrollouts: id · reward\n"
    one.write_text(head + f"  {rid}  0.1000  1  yes  0\n", encoding="utf-8")
    two.write_text(head + f"  {rid}  0.2000  1  yes  0\n", encoding="utf-8")
    found = find_baseline(tmp_path, "calc", recorded)
    assert not found.is_snapshot and found.rewards == recorded
    assert "disagree about" in (found.note or "") and rid in (found.note or "")
    # another env's snapshot, or one naming a rollout the cassette lacks, is not its baseline
    one.unlink()
    assert find_baseline(tmp_path, "other-env", recorded).source == "the recording"
    two.write_text(head + "  train-not-recorded-0  0.2000  1  yes  0\n", encoding="utf-8")
    assert find_baseline(tmp_path, "calc", recorded).source == "the recording"


def _replayed(changed, rewards, *, baseline_file=None, snapshot=None):
    summary = RunSummary(mode="replay", cassette="c", changed=dict(changed),
                         baseline="snapshot x" if baseline_file else None,
                         baseline_file=str(baseline_file) if baseline_file else None)
    return SimpleNamespace(summary=summary, rewards=dict(rewards), snapshot=snapshot)


ROWS = "# hermes-replay rollout snapshot v1\nenv: e\n\nrollouts: id · reward\n"


def test_accepting_rewrites_a_snapshot_of_the_same_rollouts_and_only_that(tmp_path):
    file = tmp_path / "t.rollouts.txt"
    file.write_text(ROWS + "  r-0  1.0000  1  yes  0\n", encoding="utf-8")
    now = ROWS + "  r-0  0.5000  1  yes  0\n"
    acceptance = Acceptance()
    acceptance.seen(Path("c"), _replayed({"r-0": (1.0, 0.5)}, {"r-0": 0.5},
                                         baseline_file=file, snapshot=now))
    [line] = acceptance.accept(str)
    assert "rewritten" in line and file.read_text(encoding="utf-8") == now
    # a run of other rollouts never overwrites it: pytest decides
    acceptance.seen(Path("c"), _replayed({"r-0": (0.5, 0.2)}, {"r-1": 0.2},
                                         baseline_file=file, snapshot=ROWS + "  r-1  0.2\n"))
    [line] = acceptance.accept(str)
    assert "holds other rollouts" in line and file.read_text(encoding="utf-8") == now


def test_accepting_against_the_recording_holds_for_the_watch_and_new_changes_still_show():
    acceptance = Acceptance()
    acceptance.seen(Path("c"), _replayed({"r-0": (1.0, 0.5)}, {"r-0": 0.5, "r-1": 1.0}))
    [line] = acceptance.accept(str)
    assert "for the rest of this watch" in line
    same = _replayed({"r-0": (1.0, 0.5)}, {"r-0": 0.5, "r-1": 1.0})
    acceptance.seen(Path("c"), same)
    assert same.summary.changed == {} and same.summary.baseline == "rewards of this watch"
    back = _replayed({}, {"r-0": 1.0, "r-1": 1.0})  # equal to the recording, not to accepted
    acceptance.seen(Path("c"), back)
    assert back.summary.changed == {"r-0": (0.5, 1.0)}
    assert acceptance.accept(str)  # and it can be accepted again


def test_the_key_reader_sees_one_key_from_a_pipe():
    read, write = os.pipe()
    reader = KeyReader(io.FileIO(read, closefd=False))
    reader.start()
    os.write(write, b"xA")
    os.close(write)
    for _ in range(100):
        if reader.keys.qsize() == 2:
            break
        import time

        time.sleep(0.02)
    assert reader.pressed("a") and not reader.pressed("a")
    reader.close()
    os.close(read)
