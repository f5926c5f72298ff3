"""Reports opened in a real headless Chromium: what a person sees, and that the page is sealed.

Each test opens a written report file, checks the DOM against the cassettes it was made from
(ids and rewards read from the cassettes, not copied from output), checks that the only request
was the file itself and that nothing logged an error, and saves a screenshot in its temp folder.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _browser import launch, open_page
from _report_inputs import MULTI, SHIPPED, changed_copy, planted_copy, recordings
from _report_inputs import project as make_project

from hermes_replay._cassette import load_cassette
from hermes_replay._report import write_report
from hermes_replay.scripted_endpoint import ScriptedEndpoint

# one worker runs the module: the browser and the Phase-2 replay are started once, not per worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_report_browser")]


@pytest.fixture(scope="module")
def browser():
    with launch() as instance:
        yield instance


def _reward_cells(page) -> dict[str, str]:
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '#rollouts tbody tr')].map(tr => [tr.querySelector('.c-id').textContent,
        tr.querySelector('.c-reward').textContent]))""")


def test_the_shipped_cassettes_report_shows_every_rollout_and_reward(browser, tmp_path):
    shipped = recordings(tmp_path / "shipped")
    report = write_report(shipped, tmp_path / "shipped.html")
    page, visit = open_page(browser, report)
    expected = {}
    for path in sorted(shipped.rglob("*.jsonl")):
        for rid, rec in load_cassette(path).rollouts.items():
            expected[rid] = f"{rec.outcome['reward']:.3f}"
    assert _reward_cells(page) == expected
    assert page.inner_text("#count-rollouts") == f"{len(expected)} rollouts"
    # the first environment's two charts were drawn by plotly (SVG), from the inlined library
    first = page.locator("#section-0 .chart")
    assert first.count() == 2
    page.wait_for_selector("#section-0 .chart[data-drawn='1'] .main-svg")
    assert page.locator("#section-0 .chart .main-svg").count() >= 2
    # a row opens its transcript, tool calls folded
    rid = next(r for r, rec in load_cassette(MULTI).rollouts.items()
               if rec.outcome.get("tool_errors"))
    page.click(f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))")
    assert page.inner_text("#transcript-title") == f"rollout {rid}"
    assert page.locator("#transcript details.call").count() >= 1
    assert not page.locator("#transcript details.call").first.evaluate("d => d.open")
    assert page.locator("#transcript details.tool-error").count() >= 1
    # the tool calls the cassette recorded, including those the reward made
    judged = next(r for r, rec in load_cassette(SHIPPED / "terminal_test_env" /
                                                 "process.jsonl").rollouts.items()
                  if any(c.source == "reward" for c in rec.tool_calls))
    page.click(f"#rollouts tbody tr:has(td.c-id:text-is('{judged}'))")
    assert "by the reward" in page.inner_text("#transcript details.recorded-tools > summary")
    assert page.locator("#transcript details.recorded-tools .by-reward").count() >= 1
    page.screenshot(path=str(tmp_path / "shipped.png"), full_page=True)
    visit.assert_quiet()
    assert (tmp_path / "shipped.png").stat().st_size > 10_000


def test_a_diff_report_marks_the_change_and_the_first_diverging_turn(browser, tmp_path):
    ids = sorted(load_cassette(MULTI).rollouts)
    moved, drifted = ids[1], ids[6]
    changed = changed_copy(tmp_path / "after.jsonl", reward_of=moved, new_reward=0.0,
                           reply_of=drifted, reply_turn=0, new_reply="No tools today.")
    report = write_report(changed, tmp_path / "diff.html", against=MULTI)
    page, visit = open_page(browser, report)
    before = load_cassette(MULTI).rollouts[moved].outcome["reward"]
    row = page.locator(f"#rollouts tbody tr:has(td.c-id:text-is('{moved}'))")
    assert row.locator(".c-delta").inner_text() == f"{0.0 - before:+.3f}"
    assert row.locator(".c-status").inner_text() == "changed"
    assert page.inner_text("#count-changed") == "1 changed"
    # sorting: Δ descending on the first click, ascending on the second (the drop first)
    page.click("#rollouts thead th[data-key='delta']")
    page.click("#rollouts thead th[data-key='delta']")
    assert page.locator("#rollouts tbody tr .c-id").first.inner_text() == moved
    # the filter keeps only what matches
    page.check("#only-changed")
    shown = page.locator("#rollouts tbody tr .c-id").all_inner_texts()
    assert sorted(shown) == sorted([moved, drifted])
    page.uncheck("#only-changed")
    page.click(f"#rollouts tbody tr:has(td.c-id:text-is('{drifted}'))")
    mark = page.locator("#diverge-mark")
    assert mark.is_visible() and "response.message" in mark.inner_text()
    assert "No tools today." in page.inner_text("#transcript .diverge-box")
    assert page.locator("#transcript .msg.diverge").count() == 1
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    visit.assert_quiet()


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a child process, as a user runs it (Playwright's sync API keeps an event
    loop running in this one, and an environment run needs its own)."""
    env = {**os.environ, "HERMES_API_KEY": "sk-test-report", "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "hermes_replay.cli", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=600)


def test_a_replay_with_a_miss_marks_the_missed_turn(browser, tmp_path):
    project = make_project(tmp_path / "project")
    rid = sorted(load_cassette(MULTI).rollouts)[5]
    planted_copy(project / "cassettes" / "multi" / "process.jsonl", rid, "(asked differently)")
    proc = _cli(project, "replay", "cassettes", "--out", "out")
    assert proc.returncode == 1  # a miss fails the replay …
    assert "report: out/report.html" in proc.stdout  # … and its report is written
    page, visit = open_page(browser, project / "out" / "report.html")
    assert page.inner_text("#count-misses") != "0 misses"
    row = page.locator(f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))")
    assert row.locator(".c-status").inner_text() == "miss"
    row.click()
    assert "replay miss at turn 1" in page.inner_text("#transcript .miss-box")
    missed = page.locator("#transcript .msg.miss")
    assert missed.count() == 1 and "miss at turn 1" in missed.inner_text()
    page.screenshot(path=str(tmp_path / "miss.png"), full_page=True)
    visit.assert_quiet()


@pytest.fixture(scope="module")
def phase2_replay(tmp_path_factory):
    """A Phase 2 (vLLM ``/generate``) recording, replayed by ``hermes-replay replay``: its output
    folder holds the scored groups with tokens, masks and inference logprobs."""
    project = make_project(tmp_path_factory.mktemp("phase2"))
    cassette, out = project / "cassettes" / "phase2.jsonl", project / "replayed"
    flags = ["process", "--env.total_steps", "1", "--env.group_size", "2",
             "--env.max_agent_turns", "4", "--env.data_path_to_save_groups",
             "recorded/groups.jsonl"]

    def cli(*args: str) -> None:
        proc = _cli(project, *args)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    with ScriptedEndpoint(script="examples", seed=0, raw_tool_format="hermes") as endpoint:
        cli("record", "environments/multi_signal_env.py", "--cassette", str(cassette),
            "--endpoint", endpoint.root_url, "--model", "scripted", "--server-type", "vllm",
            "--", *flags)
        root_url = endpoint.root_url
    host, port = root_url.rsplit("//", 1)[1].split(":")
    with socket.socket() as sock:  # the endpoint is gone: the replay is offline
        assert sock.connect_ex((host, int(port))) != 0
    cli("replay", "cassettes", "--out", str(out))
    return cassette, out


def test_phase2_tokens_are_coloured_by_mask_with_logprobs_on_hover(browser, phase2_replay,
                                                                    tmp_path):
    cassette, out = phase2_replay
    report = write_report(out, tmp_path / "phase2.html")
    page, visit = open_page(browser, report)
    rid = sorted(load_cassette(cassette).rollouts)[0]
    page.click(f"#rollouts tbody tr:has(td.c-id:text-is('{rid}'))")
    tokens = page.locator("#transcript details.tokens")
    assert "logprobs on hover" in tokens.locator("summary").inner_text()
    tokens.locator("summary").click()
    # the tokens are drawn by the <details> "toggle" event, which the browser dispatches as a
    # task after the click: wait for them (a bare count() raced it on a loaded machine)
    page.locator("#transcript .toks").wait_for(state="attached")
    trained, masked = page.locator(".toks .tok.t1"), page.locator(".toks .tok.t0")
    assert trained.count() > 0 and masked.count() > 0
    title = trained.first.get_attribute("title")
    assert "trained" in title and "logprob" in title
    logprob = float(trained.first.get_attribute("data-logprob"))
    assert logprob <= 0.0  # a real log-probability from the endpoint, not a placeholder
    text = page.inner_text("#transcript .toks")
    assert "<|im_start|>" in text  # decoded by the cassette's own tokenizer, not shown as ids
    page.screenshot(path=str(tmp_path / "phase2.png"), full_page=True)
    visit.assert_quiet()
