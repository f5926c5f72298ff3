"""Reward parts: compute_reward returns (reward, {"part": value}); the parts are stored with
the outcome and shown by show, diff (``correct 1 → 0``), snapshot text and the report. The
expected parts are recomputed here from each rollout's recorded final reply."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hermes_replay import load_cassette, run_cassette
from hermes_replay._report import write_report
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint
from hermes_replay.snapshot import render_run, reward_changes

pytestmark = pytest.mark.slow

ENV = '''
from environments.agent_loop import AgentResult
from environments.helpers import default_server_configs, final_response
from environments.hermes_base_env import HermesAgentBaseEnv, HermesAgentEnvConfig

ITEMS = [{"id": "q1", "question": "Say something."}, {"id": "q2", "question": "Say more."}]


class PartsEnv(HermesAgentBaseEnv):
    name = "parts-env"
    env_config_cls = HermesAgentEnvConfig

    @classmethod
    def config_init(cls):
        return HermesAgentEnvConfig(enabled_toolsets=["terminal"]), default_server_configs()

    async def setup(self):
        self.i = 0

    async def get_next_item(self):
        self.i += 1
        return ITEMS[(self.i - 1) % len(ITEMS)]

    def format_prompt(self, item) -> str:
        return item["question"]

    async def compute_reward(self, item, result: AgentResult, ctx):
        text = final_response(result.messages)
        correct = 1.0 if text.strip() else 0.0
        short = 1.0 if len(text) < 80 else 0.0
        return 0.8 * correct + 0.2 * short, {"correct": correct, "short": short}

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    PartsEnv.cli()
'''
CASSETTE = "cassettes/parts_env/process.jsonl"


def state_of(html: str) -> dict:
    """The JSON the report page renders."""
    found = re.search(r'<script type="application/json" id="report-state">(.*?)</script>',
                      html, re.S)
    assert found, "the page holds no state"
    return json.loads(found.group(1))


def _expected(cassette: Path) -> dict[str, dict[str, float]]:
    """Each rollout's parts, from its recorded last reply."""
    out = {}
    for rid, record in load_cassette(cassette).rollouts.items():
        last = max(record.interactions, key=lambda i: i.seq)
        text = last.response["body"]["choices"][0]["message"].get("content") or ""
        text = re.sub(r"<tool_call>.*?</tool_call>", "", text, flags=re.S)
        out[rid] = {"correct": 1.0 if text.strip() else 0.0, "short": 1.0 if len(text) < 80
                    else 0.0}
    return out


def test_reward_parts_are_kept_and_shown_everywhere(tmp_path, monkeypatch, capsys):
    project = tmp_path / "project"
    (project / "environments").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    env = project / "environments" / "parts_env.py"
    env.write_text(ENV, encoding="utf-8")
    monkeypatch.chdir(project)
    with ScriptedEndpoint(script="generic", seed=0) as endpoint:
        assert main(["record", str(env.relative_to(project)), "--endpoint", endpoint.base_url,
                     "--model", "scripted", "--", "process", "--env.total_steps", "2",
                     "--env.group_size", "1"]) == 0, capsys.readouterr().err[-2000:]
    capsys.readouterr()
    cassette = load_cassette(CASSETTE)
    stored = {rid: rec.outcome.get("parts") for rid, rec in cassette.rollouts.items()}
    expected = _expected(project / CASSETTE)
    assert stored == expected and len(stored) == 2

    rid = sorted(expected)[0]
    assert main(["show", CASSETTE, "--rollout", rid]) == 0
    want = expected[rid]
    assert (f"reward parts: correct {want['correct']:.4g}, short {want['short']:.4g}"
            in capsys.readouterr().out)

    state = state_of(write_report(Path(CASSETTE), tmp_path / "r.html").read_text("utf-8"))
    assert {row["id"]: row["parts"] for row in state["rows"]} == {
        r: f"correct {p['correct']:.4g}, short {p['short']:.4g}" for r, p in expected.items()}

    before = run_cassette(CASSETTE, out_dir=tmp_path / "before", raise_errors=False)
    assert {r.id: r.parts for r in before.rollouts} == expected
    env.write_text(ENV.replace('correct = 1.0 if text.strip() else 0.0', 'correct = 0.0'),
                   encoding="utf-8")
    after = run_cassette(CASSETTE, out_dir=tmp_path / "after", raise_errors=False)
    assert main(["diff", CASSETTE, str(tmp_path / "after")]) == 1
    out = capsys.readouterr().out
    moved = [r for r, p in expected.items() if p["correct"] == 1.0]
    assert moved, "the recording should have a correct rollout to move"
    for r in moved:
        line = next(x for x in out.splitlines() if x.strip().startswith(r))
        assert "correct 1 → 0" in line
    changes = "\n".join(reward_changes(render_run(before), render_run(after)))
    rows = [line for line in changes.splitlines() if line.strip().startswith(tuple(moved))]
    assert len(rows) == len(moved) and all("correct 1 → 0" in line for line in rows), changes
    assert json.loads((tmp_path / "after" / "result.json").read_text())["rollouts"][0]["parts"]
    assert after.wandb_steps and after.wandb == {k: v for s in after.wandb_steps
                                                 for k, v in s.items()}
