"""Each rollout of an ``n > 1`` group shows its own completion everywhere (issue 35, item 4).

``arith_chat_env`` answers a group of four with one ``chat_completion(n=4)``: the four rollouts
share that request, and each one's record says which sample of the reply was its own
(``outcome.choice``). ``show --rollout``, ``show --raw``, ``diff`` and the report's transcript
(opened in a real headless Chromium) must show that sample — not the first one for all four.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _plain_script import plain_script
from _sum_oracle import own_rollouts

from hermes_replay import bundled_tokenizer_path
from hermes_replay._diff.compare import compare_paths
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def _record(cassette: Path, seed: int) -> None:
    here = Path.cwd()
    os.chdir(HERE)
    try:
        with ScriptedEndpoint(script=plain_script(), seed=seed) as endpoint:
            code = main(["record", "arith_chat_env.py", "--cassette", str(cassette),
                         "--endpoint", endpoint.base_url, "--model", "scripted", "--",
                         "process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
                         "--env.total_steps", "2", "--env.group_size", "4",
                         "--env.data_path_to_save_groups", str(cassette.with_suffix(".out"))])
    finally:
        os.chdir(here)
    assert code == 0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("n-views")
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    _record(a, seed=0)
    _record(b, seed=1)
    yield a, b
    import wandb

    if wandb.run is not None:
        wandb.finish()


def _samples(cassette: Path) -> dict[str, str]:
    """Each rollout's own completion, read from the group's reply by the sample its record
    names (``_sum_oracle.own_rollouts``)."""
    return {rid: reply for rid, (_q, reply, _o) in own_rollouts(cassette).items()}


def _a_rollout_unlike_its_first(cassette: Path) -> tuple[str, str, str]:
    samples = _samples(cassette)
    for rid, text in samples.items():
        first = samples[rid.rsplit("-", 1)[0] + "-0"]
        if text != first:
            return rid, text, first
    raise AssertionError(f"every sample of every group is alike: {samples}")


def test_show_and_raw_show_the_rollouts_own_sample(recorded, capsys):
    cassette = recorded[0]
    rid, own, first = _a_rollout_unlike_its_first(cassette)
    assert main(["show", str(cassette), "--rollout", rid, "--full"]) == 0
    out = capsys.readouterr().out
    assert own in out and first not in out
    assert f"it is sample {int(rid.rsplit('-', 1)[1]) + 1} of the reply" in out
    assert main(["show", str(cassette), "--rollout", rid, "--raw"]) == 0
    raw, _end = json.JSONDecoder().raw_decode(capsys.readouterr().out)  # then its outcome
    assert [c["message"]["content"] for c in raw["response"]["body"]["choices"]] == [own]


def test_diff_compares_each_rollouts_own_sample(recorded):
    a, b = recorded
    before, after = _samples(a), _samples(b)
    moved = {rid for rid in before if rid in after and before[rid] != after[rid]}
    assert moved, "the two recordings must answer some rollout differently"
    report = compare_paths(a, b)
    replied = {d.rollout for d in report.divergences  # (the ports differ: so do the URLs)
               if any(c.field.startswith("response") for c in d.changes)}
    assert replied == moved


def test_the_reports_transcript_shows_the_rollouts_own_sample(recorded, tmp_path):
    import sys
    sys.path.insert(0, str(HERE.parent / "hermes_replay"))
    from _browser import launch, open_page

    from hermes_replay._report import write_report

    cassette = recorded[0]
    rid, own, first = _a_rollout_unlike_its_first(cassette)
    report = write_report([cassette], tmp_path / "report.html")
    with launch() as browser:
        page, visit = open_page(browser, report)
        page.click(f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))")
        assert page.inner_text("#transcript-title") == f"rollout {rid}"
        text = page.inner_text("#transcript")
        visit.assert_quiet()
    assert own in text and first not in text
