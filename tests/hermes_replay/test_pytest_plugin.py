"""The pytest plugin, run as real pytest sessions (pytester) over a shipped cassette."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

# pytester's in-process runs drop modules first imported inside them, and numpy (under
# atroposlib) cannot be imported twice per process: import the heavy stack out here.
import environments.hermes_base_env  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CASSETTE = ROOT / "cassettes" / "multi_signal_env" / "process.jsonl"
ENV_FILE = ROOT / "environments" / "multi_signal_env.py"



def _readme_example() -> str:
    """The docs' example test (docs/pytest.md), exactly as a user would copy it."""
    readme = (ROOT / "docs" / "pytest.md").read_text(encoding="utf-8")
    section = readme[readme.index("# The pytest plugin"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```", start)]


SNAPSHOT_TEST = _readme_example()


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user project: the example env file (editable copy) and its recorded cassette.

    Its pytest runs are plain sessions, as a user's: when this suite runs under xdist, the
    worker's variables would make syrupy in the inner session act as an xdist worker, which
    neither reports nor deletes unused snapshots (and so proves nothing about either)."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    (pytester.path / "cassettes" / "multi_signal_env").mkdir(parents=True)
    shutil.copy(CASSETTE, pytester.path / "cassettes" / "multi_signal_env" / "process.jsonl")
    (pytester.path / "environments").mkdir()
    shutil.copy(ENV_FILE, pytester.path / "environments" / "multi_signal_env.py")
    pytester.makepyfile(test_rewards=SNAPSHOT_TEST)
    return pytester


def test_a_first_run_says_to_write_the_snapshot_once(project: pytest.Pytester) -> None:
    first = project.runpytest("-p", "no:cacheprovider")
    first.assert_outcomes(failed=1)
    text = "\n".join(first.outlines)
    assert "no snapshot yet: this is the test's first run. Run `pytest --snapshot-update` " \
           "once" in text
    project.runpytest("--snapshot-update", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


# the plugin loaded from its entry point, and loaded by -p before every entry point: between
# two ``tryfirst`` explanation hooks (syrupy's and ours) the one registered last won, so in the
# second order (and in some installs' entry-point order) syrupy's diff used to replace ours
@pytest.mark.parametrize(
    "load", [[], ["-p", "no:hermes_replay", "-p", "hermes_replay.pytest_plugin"]],
    ids=["entry-point", "loaded-first"])
def test_changed_reward_shows_as_a_diff_naming_the_rollout(project: pytest.Pytester,
                                                          load: list[str]) -> None:
    first = project.runpytest("--snapshot-update", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    # quiet: atroposlib's UserWarnings and config dump went to the env log, not into pytest's
    # warnings summary or the output
    noise = [line for line in first.outlines
             if "UserWarning" in line or "APIServerConfig(" in line or "EnvConfig(" in line]
    assert noise == [], noise
    snap = next(project.path.rglob("*.rollouts.txt")).read_text()
    assert "train-" in snap and "wandb metrics" in snap

    # Unchanged code replays to the same snapshot.
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)

    # A reward change (efficiency weight 0.2 -> 0.1) fails with a diff naming rollouts.
    env = project.path / "environments" / "multi_signal_env.py"
    text = env.read_text()
    assert '"efficiency": 0.2' in text
    env.write_text(text.replace('"efficiency": 0.2', '"efficiency": 0.1'))
    old_rewards = {line.split()[0]: line.split()[1] for line in snap.splitlines()
                   if line.startswith("  train-")}
    changed = project.runpytest("-p", "no:cacheprovider", *load)
    changed.assert_outcomes(failed=1)
    # one line per changed rollout, `rollout  old → new  Δ`, in the plugin's own section,
    # which pytest never shortens: every changed rollout is there (not 2 of 4)
    out = changed.outlines
    start = next(i for i, line in enumerate(out)
                 if re.match(r"^-+ hermes-replay reward snapshot -+$", line))
    # `rollout (item)  old → new  Δ`: the item's label beside the id (``_cassette/labels``)
    rows = [re.match(r"^\s+(train-\S+) \(\S+\)\s+(\d\.\d{4}) → (\d\.\d{4})\s+(\S+)", line)
            for line in out[start + 1:]]
    found = {row.group(1): row.groups()[1:] for row in rows if row}
    new_rewards = {rid: new for rid, (_, new, _) in found.items()}
    after = next(project.path.rglob("*.rollouts.txt")).read_text()  # (not rewritten)
    assert after == snap
    assert len(new_rewards) >= 6, out[-40:]  # more than pytest's 8-line explanation holds
    assert "more change(s): every change is in the 'hermes-replay reward snapshot' section " \
        "below" in \
        "\n".join(out)
    for rid, (before, reward, delta) in found.items():
        assert before == old_rewards[rid]
        assert delta == f"{float(reward) - float(old_rewards[rid]):+.4f}"
    assert out[start + 1].startswith(f"{len(new_rewards)} of {len(old_rewards)} rollout(s) "
                                     "changed (snapshot → this run)")

    # --snapshot-update accepts the change in one step; the next run is green again.
    project.runpytest("--snapshot-update", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_test_that_failed_before_its_snapshot_keeps_it(project: pytest.Pytester) -> None:
    project.runpytest("--snapshot-update", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    snap = next(project.path.rglob("*.rollouts.txt"))
    good = snap.read_text()
    # the prompt changes: every request misses, replay_run raises before the snapshot
    env = project.path / "environments" / "multi_signal_env.py"
    env.write_text(env.read_text().replace("Compute it with the terminal", "Compute it"))
    for flags in ((), ("--snapshot-update",)):
        broken = project.runpytest(*flags, "-p", "no:cacheprovider")
        broken.assert_outcomes(failed=1)
        text = "\n".join(broken.outlines)
        assert "CassetteMiss" in text and "Compute it with the terminal" in text
        # the next step is what exists in pytest, not a Python keyword argument
        assert "pytest --replay-mode auto test_rewards.py::test_rewards_did_not_move" in text
        assert 'mode="auto"' not in text
        # a changed prompt is content: no normalizer or ignored field is offered for it
        assert "ignore_paths" not in text and "--add datetime" not in text
        # the failure points at the test's own call, not the plugin's source
        assert "raise_errors = options.pop" not in text and "def run(" not in text
        assert "Deleted" not in text and "unused" not in text
        assert snap.read_text() == good  # the good reference survives


def test_missing_marker_is_a_clear_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_x(replay_run):
            replay_run()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=0, failed=1)
    result.stdout.fnmatch_lines(["*no cassette given*pytest.mark.cassette*"])


def test_replay_mode_option_is_validated(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--replay-mode", "bogus")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*invalid choice*bogus*"])


def test_hermes_cassette_blocks_the_network_in_replay(pytester: pytest.Pytester,
                                                      tmp_path: Path) -> None:
    pytester.makepyfile(
        f"""
        import socket, pytest
        from hermes_replay._runner.netblock import NetworkBlocked

        @pytest.mark.cassette({str(CASSETTE)!r})
        def test_outbound(hermes_cassette):
            s = socket.socket()
            with pytest.raises(NetworkBlocked):
                s.connect(("192.0.2.10", 443))
            s.close()
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


AUTO_TEST = """
import os
import pytest
from hermes_replay import load_cassette

CASSETTE = "cassettes/calc_tool_env/process.jsonl"


@pytest.mark.cassette(CASSETTE)
def test_calc(replay_run):
    command = None
    if os.environ.get("CALC_CRASH"):  # the recorded command, made to crash at setup
        command = [*load_cassette(CASSETTE).header.command, "--env.crash_in", "setup"]
    assert len(replay_run(command=command).rollouts) == 4
"""


def test_auto_mode_reports_what_it_rerecorded_and_keeps_the_old_file_until_it_succeeds(
        _calc_recording: Path, pytester: pytest.Pytester,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from _calc_project import CASSETTE_REL, ENV_REL, copy_project

    from environments.tools import registry
    from hermes_replay import load_cassette
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    monkeypatch.setattr(registry, "_TOOLS", dict(registry._TOOLS))  # the env's own tool
    monkeypatch.setattr(registry, "_TASK_CLEANUPS", list(registry._TASK_CLEANUPS))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    root = copy_project(_calc_recording, pytester.path)
    pytester.makepyfile(test_calc=AUTO_TEST)
    cassette = root / CASSETTE_REL
    before = load_cassette(cassette)
    env = root / ENV_REL  # item 1's prompt changes: its 2 rollouts are new, item 0's are kept
    old = 'f"What is {i} + {i + 1}? Use the calculator."'
    assert old in env.read_text()
    env.write_text(env.read_text().replace(old, old + ' + ("!" if i == 1 else "")'))
    # auto re-runs the recorded command: its endpoint must answer again
    port = int(before.header.base_url.rsplit(":", 1)[1].split("/")[0])
    with ScriptedEndpoint(script="generic", seed=0, port=port) as endpoint:
        monkeypatch.setenv("CALC_CRASH", "1")
        crashed = pytester.runpytest("--replay-mode", "auto", "-p", "no:cacheprovider")
        crashed.assert_outcomes(failed=1)
        assert cassette.read_bytes() == before.path.read_bytes()  # the old file stays
        crashed.stdout.fnmatch_lines([
            "*hermes-replay --replay-mode auto*",
            f"test_calc.py::test_calc: *{CASSETTE_REL}: the run failed: the cassette was kept "
            "as it was"])
        monkeypatch.delenv("CALC_CRASH")
        result = pytester.runpytest("--replay-mode", "auto", "-p", "no:cacheprovider")
        recorded_now = len(endpoint.requests)
    result.assert_outcomes(passed=1)
    after = load_cassette(cassette)
    new = set(after.rollouts) - set(before.rollouts)
    # item 1's old rollouts are gone (the command no longer makes them), item 0's kept as is
    assert len(new) == 2 and len(set(after.rollouts) & set(before.rollouts)) == 2
    assert len(after.rollouts) == 4
    turns = sum(len(after.rollouts[r].interactions) for r in new)
    assert recorded_now == turns  # only what was missing went to the endpoint
    holds = len(after.interactions)
    dropped = len(before.interactions) - (holds - turns)  # item 1's old rollouts
    result.stdout.fnmatch_lines([
        "*hermes-replay --replay-mode auto*",
        f"test_calc.py::test_calc: *{CASSETTE_REL}: re-recorded {turns} turn(s) in 2 "
        f"rollout(s): *; the new file holds {holds} interaction(s) in 4 rollout(s): {turns} "
        f"re-recorded + {holds - turns} kept as they were; {dropped} old recording(s) "
        f"dropped: all {dropped} in 2 rollout(s) the command no longer makes (*)"])
    # and the next plain run replays it offline
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_explanation_counts_the_changes_left_not_the_lines() -> None:
    from hermes_replay.pytest_plugin import shown_changes

    head = "3 of 3 rollout(s) changed (snapshot → this run); …"
    rows = [[f"  train-{i}  1.0000 → 0.5000  -0.5000", f"      its reply: answer {i}"]
            for i in range(3)]
    shown = shown_changes([head, *[line for row in rows for line in row]])
    assert shown[1:5] == [*rows[0], *rows[1]]  # a row never without its reply
    assert shown[-1].startswith("… 1 more change(s):")  # one row left (two lines)
