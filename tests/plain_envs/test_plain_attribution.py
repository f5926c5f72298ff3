"""Each reward on the rollout that earned it: attribution by content (issue 45, item 1).

``shuffling_env`` shuffles its completions before ``score()``, as many Atropos envs do, so entry
``i`` of the returned group is usually another choice than ``i``. The stand-in answers sample
``j`` of every group with a reply it knows to be right or wrong (two of each, each reply's text
its own). The oracle is the env's rule, recomputed here on each rollout's own reply (read from
the cassette by the sample its record names): the cassette, a replay, the snapshot text, ``show``
and the report's transcript must all give each rollout its own reply's reward. With
``--env.drop_wrong True`` the env leaves the wrong replies out: those rollouts must say they
were dropped — by atroposlib, whose token count check skips the short group — and carry no
reward, never a neighbour's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _sum_oracle import SUM, env_rule, own_rollouts

from hermes_replay import bundled_tokenizer_path, load_cassette, run_cassette
from hermes_replay._terminal.render import fmt_reward
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import Conversation, Reply, Rule, Script, ScriptedEndpoint
from hermes_replay.snapshot import own_replies, render_run

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
RIGHT_SAMPLES = (0, 3)  # the stand-in's samples 1 and 4 are right, 2 and 3 wrong


def _reply(conv: Conversation, rng: object) -> Reply:
    a, b = map(int, SUM.search(conv.last_user_text).groups())  # type: ignore[union-attr]
    j = conv.sample % 4
    answer = a + b if j in RIGHT_SAMPLES else a + b + 1 + j
    return Reply(content=f"Reply {j}: adding {a} and {b} carefully, digit by digit, the total "
                         f"is \\boxed{{{answer}}}.")


def _script() -> Script:
    return Script("shuffled-sums", [Rule("sum", lambda c: bool(SUM.search(c.last_user_text)),
                                         _reply)])


def _record(cassette: Path, *extra: str) -> int:
    here = Path.cwd()
    os.chdir(HERE)
    try:
        with ScriptedEndpoint(script=_script(), seed=3) as endpoint:
            # --seed: the env's random.shuffle draws from Python's generator, which record
            # seeds afresh unless told; without it the shuffle sometimes moved no reward
            return main(["record", "shuffling_env.py", "--cassette", str(cassette),
                         "--endpoint", endpoint.base_url, "--model", "scripted", "--seed",
                         "0", "--",
                         "process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
                         "--env.total_steps", "3", "--env.group_size", "4",
                         "--env.data_path_to_save_groups", str(cassette.with_suffix(".out")),
                         *extra])
    finally:
        os.chdir(here)


@contextmanager
def _report_page(cassette: Path, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """The cassette's HTML report open in headless chromium: (page, visit)."""
    sys.path.insert(0, str(HERE.parent / "hermes_replay"))
    from _browser import launch, open_page

    from hermes_replay._report import write_report

    report = write_report([cassette], tmp_path / "report.html")
    with launch() as browser:
        yield open_page(browser, report)


@pytest.fixture(scope="module")
def shuffled(tmp_path_factory):
    cassette = tmp_path_factory.mktemp("shuffled") / "process.jsonl"
    assert _record(cassette) == 0
    yield cassette
    import wandb

    if wandb.run is not None:
        wandb.finish()


def test_every_rollouts_reward_is_its_own_replys_in_the_cassette(shuffled):
    rollouts = own_rollouts(shuffled)
    assert len(rollouts) == 12  # 3 groups of 4
    wrong = {rid: (reply, outcome["reward"]) for rid, (question, reply, outcome)
             in rollouts.items() if outcome["reward"] != env_rule(question, reply)}
    assert wrong == {}
    for outcome in (o for _q, _r, o in rollouts.values()):
        assert outcome["attribution"] == "text" and "ambiguous" not in outcome
    # the shuffle really moved entries: position would have put rewards on other replies
    loaded = load_cassette(shuffled)
    groups = [r.outcome for r in loaded.rollouts.values() if r.outcome.get("kind") == "group"]
    assert len(groups) == 3
    by_position_wrong = sum(
        score != env_rule(*rollouts[rid][:2])
        for g in groups for rid, score in zip(g["rollouts"], g["scores"], strict=True))
    assert by_position_wrong > 0, "the stand-in's seed must make the shuffle move a reward"


def test_replay_snapshot_show_and_report_give_each_rollout_its_own(shuffled, tmp_path,
                                                                   capsys):
    rollouts = own_rollouts(shuffled)
    expected = {rid: env_rule(q, reply) for rid, (q, reply, _) in rollouts.items()}
    result = run_cassette(shuffled, out_dir=tmp_path / "replay")
    assert result.error is None and result.summary.misses == []
    assert result.rewards == expected
    lines = render_run(result).splitlines()  # the snapshot text: one line per rollout
    for rid, reward in expected.items():
        (line,) = [x for x in lines if x.split() and x.split()[0] == rid]
        assert float(line.split()[1]) == reward, line
    replies = own_replies(shuffled, list(expected))  # what a failed snapshot quotes
    for rid, (_q, reply, _o) in rollouts.items():
        assert replies[rid] == " ".join(reply.split())

    for rid, (_q, reply, _o) in rollouts.items():
        assert main(["show", str(shuffled), "--rollout", rid, "--full"]) == 0
        out = capsys.readouterr().out
        others = {r for x, (_, r, _o) in rollouts.items() if x != rid and r != reply}
        assert reply in out and not any(o in out for o in others), rid
        assert f"rollout {rid}  reward {fmt_reward(expected[rid])} ·" in out, out[:600]

    with _report_page(shuffled, tmp_path) as (page, visit):
        for rid, (_q, reply, _o) in list(rollouts.items())[:4]:
            row = f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))"
            cells = page.inner_text(row)
            assert f"{expected[rid]:.3f}" in cells or f"{expected[rid]:g}" in cells, cells
            page.click(row)
            text = page.inner_text("#transcript")
            others = {r for x, (_, r, _o) in rollouts.items() if x != rid and r != reply}
            assert reply in text and not any(o in text for o in others), rid
        visit.assert_quiet()


def test_dropped_entries_say_so_and_carry_no_neighbours_reward(tmp_path, capsys):
    cassette = tmp_path / "dropping.jsonl"
    assert _record(cassette, "--env.drop_wrong", "True") == 0
    out = capsys.readouterr().out
    rollouts = own_rollouts(cassette)
    assert len(rollouts) == 12
    for rid, (question, reply, outcome) in rollouts.items():
        right = env_rule(question, reply) == 1.0
        assert outcome["reward"] is None, (rid, outcome)  # no reward reaches a trainer
        if right:  # scored by the env, then skipped with its group by atroposlib
            assert outcome["env_score"] == 1.0
            assert "token count mismatch (2 entries, group_size 4)" in outcome["dropped"]
        else:  # left out by the env's own filter
            assert "env_score" not in outcome
            assert outcome["dropped"].startswith("score() returned no entry holding this")
    # the record's summary counts and names the skipped groups
    assert "3 group(s) dropped, not trained on and left out of the mean reward" in out, \
        out[-3000:]
    assert "token count mismatch (2 entries, group_size 4)" in out
    assert "mean reward -" in out

    # the report says it too, in each row and in the rollout's own facts (as `show` does)
    with _report_page(cassette, tmp_path) as (page, visit):
        for rid, (_q, _reply, outcome) in list(rollouts.items())[:6]:
            row = f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))"
            cell = page.inner_text(f"{row} td.c-reward")
            assert cell.startswith("–") and outcome["dropped"][:40] in cell, (rid, cell)
            page.click(row)
            assert outcome["dropped"][:40] in page.inner_text("#transcript .facts"), rid
        visit.assert_quiet()


def _as_recorded_before(cassette: Path, older: Path) -> None:
    """``cassette`` as the harness wrote it before attribution by content: each rollout's
    reward the group's score at its position, no ``attribution`` or ``samples``."""
    import json

    lines = [json.loads(x) for x in cassette.read_text().splitlines()]
    groups = {x["rollout"]: x for x in lines if x.get("type") == "outcome"
              and x.get("kind") == "group"}
    for x in lines:
        group = groups.get(x.get("traffic") or "")
        if x.get("type") == "outcome" and group is not None:
            x.pop("attribution"), x.pop("samples")
            x["reward"] = group["scores"][group["rollouts"].index(x["rollout"])]
    older.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_an_older_cassette_is_flagged_and_replayed_by_content(shuffled, tmp_path, capsys):
    older = tmp_path / "older.jsonl"
    _as_recorded_before(shuffled, older)
    rollouts = own_rollouts(shuffled)
    expected = {rid: env_rule(q, reply) for rid, (q, reply, _) in rollouts.items()}
    as_old = {rid: o["reward"] for rid, (_q, _r, o) in own_rollouts(older).items()}
    wrong = {rid for rid in expected if as_old[rid] != expected[rid]}
    assert wrong  # the old way put some rewards on other replies
    for rid in rollouts:
        assert main(["show", str(older), "--rollout", rid]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "reward given by position, not matched to its reply by content" in out, rid
    from hermes_replay._report import _charts
    from hermes_replay._report._model import build_state
    from hermes_replay._report._sources import load_runs, pair_runs

    state = build_state(pair_runs(load_runs(older), None), subject="t", against=None,
                        charts=_charts)
    notes = {row["id"]: row["note"] for row in state["rows"]}
    assert all("reward given by position" in (notes[rid] or "") for rid in rollouts), notes
    result = run_cassette(older, out_dir=tmp_path / "replay")
    assert result.rewards == expected
    assert set(result.changed_rewards()) == wrong
    (note,) = [h for h in result.handled if "recorded by position" in h]
    assert note.startswith(f"{len(wrong)} changed reward(s) were recorded by position")
