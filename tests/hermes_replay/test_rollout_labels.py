"""Rollouts by name: the item's label beside the id in every view, ids still the identity.

The oracle is the recording itself: each calc rollout's first user message asks "What is
{i} + {i+1}?" for the item whose id is ``i``, so the label every view shows must be that
``i`` — read here from the transcript, never from the label the harness stored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _report_inputs import state_of

from hermes_replay import load_cassette, rollout_label
from hermes_replay._cassette.labels import labels
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._corpus.watch_run import Replayed, verdict_lines
from hermes_replay._report import write_report
from hermes_replay._runner.result_io import load_run_result
from hermes_replay._terminal.render import Style
from hermes_replay.cli import main
from hermes_replay.snapshot import render_run, reward_changes, without_labels

CASSETTE = Path("cassettes/calc_tool_env/process.jsonl")
PLAIN = Style(None)


def test_the_label_rule():
    assert rollout_label({"id": "fib_20", "name": "x"}) == "fib_20"
    assert rollout_label({"task_id": 7, "question": "q"}) == "7"
    assert rollout_label(frozenset({("name", "word sums"), ("role", "user")})) == "word sums"
    assert rollout_label({"id": ["not", "a", "name"], "title": "t"}) == "t"
    assert rollout_label(("a tuple", 3)) is None and rollout_label({"question": "q"}) is None
    assert rollout_label({"id": True}) is None  # a flag is no name
    long = rollout_label({"id": "x" * 100})
    assert long is not None and len(long) == 48 and long.endswith("…")

    class Hooked:
        def rollout_label(self, item):
            return f"board {item[0]}"

    class Broken:
        def rollout_label(self, item):
            raise KeyError("slug")

    assert rollout_label((3, 4), Hooked()) == "board 3"  # the env's hook wins
    assert rollout_label({"id": "kept"}, Broken()) is None  # a failing hook: no label, no crash


def test_a_rollouts_own_label_wins_over_its_groups():
    outcomes = {"g-0": {"kind": "group", "label": "item", "rollouts": ["g-0-0", "g-0-1"]},
                "g-0-1": {"reward": 1.0, "label": "own"}, "g-0-0": {"reward": 0.0}}
    assert labels(outcomes) == {"g-0": "item", "g-0-0": "item", "g-0-1": "own"}


def _oracle(cassette: Path) -> dict[str, str]:
    """Rollout -> the id of the item its first user message asks about."""
    out = {}
    for rid, record in load_cassette(cassette).rollouts.items():
        first = min(record.interactions, key=lambda i: i.seq)
        users = [m["content"] for m in first.request["body"]["messages"] if m["role"] == "user"]
        out[rid] = re.match(r"What is (\d+) \+", users[0]).group(1)
    return out


def test_every_view_names_a_rollouts_item(calc_project, tmp_path, capsys):
    expected = _oracle(calc_project / CASSETTE)
    assert len(expected) == 4 and len(set(expected.values())) == 2

    assert main(["ls", str(CASSETTE)]) == 0
    listing = capsys.readouterr().out
    for rid, label in expected.items():
        row = next(line for line in listing.splitlines() if rid in line)
        assert row.split()[:2] == [rid, label]

    label = sorted(expected.values())[0]
    assert main(["show", str(CASSETTE), "--rollout", label]) == 0  # a label picks its rollouts
    shown = capsys.readouterr().out
    titles = re.findall(r"^rollout (\S+) \((\S+)\)", shown, re.M)
    assert sorted(titles) == sorted((r, x) for r, x in expected.items() if x == label)

    out = tmp_path / "out"
    assert main(["replay", str(CASSETTE), "--out", str(out), "--no-report", "-j", "1"]) == 0
    capsys.readouterr()
    result = load_run_result(next(out.rglob("result.json")))
    assert {r.id: r.label for r in result.rollouts} == expected
    text = render_run(result)
    for rid, label in expected.items():
        assert re.search(rf"^  {re.escape(rid)} .*  # {label}$", text, re.M)

    # diff: a reward moved in a copy of the cassette; the row names the item
    moved = sorted(expected)[1]
    edited = tmp_path / "edited.jsonl"
    lines = (calc_project / CASSETTE).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "outcome" and record.get("rollout") == moved:
            record["reward"] = -5.0
            lines[i] = json.dumps(record)
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["diff", str(CASSETTE), str(edited)]) == 1
    assert f"{moved} ({expected[moved]})" in capsys.readouterr().out

    state = state_of(write_report(CASSETTE, tmp_path / "r.html").read_text(encoding="utf-8"))
    assert {row["id"]: row["label"] for row in state["rows"]} == expected


def test_watch_and_replay_name_the_item_of_a_moved_reward():
    summary = RunSummary(mode="replay", cassette="c.jsonl", rollouts=2,
                         changed={"train-98db0bb744d7-0-1": (1.0, 0.0)},
                         labels={"train-98db0bb744d7-0-1": "fib_20"})
    watch = "\n".join(verdict_lines("c.jsonl", Replayed(summary, "process"), 0.1, PLAIN))
    assert "train-98db0bb744d7-0-1 (fib_20): 1.000 -> 0.000" in watch
    assert "train-98db0bb744d7-0-1 (fib_20): 1.000 -> 0.000" in "\n".join(summary.lines(PLAIN))


SNAPSHOT = """# hermes-replay rollout snapshot v1
env: calc

rollouts: id · reward · turns · finished · tool errors
  train-a-0  1.0000  2  yes  0
  train-b-0  0.5000  2  yes  0
"""


def test_a_snapshot_accepted_before_labels_still_matches_and_changes_name_the_item():
    labelled = SNAPSHOT.replace("yes  0\n  train-b", "yes  0  # fib_20\n  train-b")
    assert without_labels(labelled) == without_labels(SNAPSHOT)
    moved = labelled.replace("train-b-0  0.5000", "train-b-0  0.2500").replace(
        "train-b-0  0.2500  2  yes  0", "train-b-0  0.2500  2  yes  0  # fib_30")
    lines = reward_changes(SNAPSHOT, moved)
    assert any(line.split()[:4] == ["train-b-0", "(fib_30)", "0.5000", "→"] for line in lines)
    added = labelled + "  train-c-0  0.7500  1  yes  0  # new_item\n"
    # a row only one side has shows its reward: that is what --snapshot-update would accept
    assert any("train-c-0 (new_item)" in line and "only in this run: reward 0.7500" in line
               for line in reward_changes(SNAPSHOT, added))


@pytest.mark.parametrize("text", [SNAPSHOT])
def test_the_extension_compares_without_labels(text):
    from hermes_replay.snapshot import RolloutSnapshotExtension

    extension = RolloutSnapshotExtension.__new__(RolloutSnapshotExtension)
    labelled = text.replace("yes  0\n  train-b", "yes  0  # fib_20\n  train-b")
    assert extension.matches(serialized_data=labelled, snapshot_data=text)
    assert not extension.matches(serialized_data=labelled.replace("0.5000", "0.2500"),
                                 snapshot_data=text)
