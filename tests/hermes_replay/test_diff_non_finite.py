"""``diff`` with rewards that are not finite numbers (issue 25, item 20).

A reward function can return NaN (0/0 in a ratio) or ±inf; the cassette stores what it got.
``diff`` must show it, count it as a change exactly when one side differs, and ``--json`` must
stay strict JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hermes_replay._cassette import load_cassette, write_cassette
from hermes_replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
EVALUATE = ROOT / "cassettes" / "multi_signal_env" / "evaluate.jsonl"


def _with_rewards(dst: Path, rewards: list[float]) -> Path:
    c = load_cassette(EVALUATE)
    outs = {rid: dict(o) for rid, o in c.outcomes.items()}
    for rid, reward in zip(sorted(outs), rewards, strict=False):
        outs[rid]["reward"] = reward
    write_cassette(dst, c.header, list(c.interactions), outs, list(c.tool_calls))
    return dst


def _strict(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"--json printed {constant}, which is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_nan_and_inf_rewards_are_shown_not_a_crash(tmp_path, capsys):
    a = _with_rewards(tmp_path / "a.jsonl", [0.5, 0.25])
    b = _with_rewards(tmp_path / "b.jsonl", [math.nan, -math.inf])
    code = main(["diff", str(a), str(b)])
    out = capsys.readouterr().out
    assert code == 1
    assert "nan" in out and "-inf" in out and "2 reward(s) changed" in out

    code = main(["diff", str(a), str(b), "--json"])
    doc = _strict(capsys.readouterr().out)
    assert code == 1
    by_b = sorted((r["a"], r["b"], r["delta"]) for r in doc["rewards"])
    assert by_b == [(0.25, "-Infinity", None), (0.5, "NaN", None)]
    mean = next(m for m in doc["metrics"] if m["name"] == "rollouts:eval/mean_reward")
    assert mean["b"] == "NaN" and mean["delta"] is None


def test_nan_on_both_sides_is_no_change(tmp_path, capsys):
    a = _with_rewards(tmp_path / "a.jsonl", [math.nan, math.inf])
    b = _with_rewards(tmp_path / "b.jsonl", [math.nan, math.inf])
    assert main(["diff", str(a), str(b), "--json"]) == 0
    doc = _strict(capsys.readouterr().out)
    assert doc["equal"] and doc["rewards"] == []
