"""A replay that did not really run never passes — through ``run_cassette``, the CLI and the
pytest plugin alike: an environment that crashes, one that runs no rollout, a recorded argv of
``--help``, and a cassette holding a rollout the run leaves out.

Each case is a cassette of ``calc_tool_env`` (a user env with its own tool) whose header
command, or content, makes the replay go wrong in that one way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _calc_project import (
    CASSETTE_REL,
    add_rollout_the_run_skips,
    edit_command,
    keep_only_header,
)

# pytester's in-process runs drop modules first imported inside them, and numpy (under
# atroposlib) cannot be imported twice per process: import the heavy stack out here.
import environments.hermes_base_env  # noqa: F401
import hermes_replay
from hermes_replay.cli import main

# case -> (what the error must say, how many rollouts it must name as never run)
CASES: dict[str, tuple[str, int]] = {
    "crash": ("the environment exited with code 1", 4),
    "no_rollout": ("the environment exited normally but ran 0 of the 4 recorded rollouts", 4),
    "help": ("the environment exited normally but ran 0 of the 4 recorded rollouts", 4),
    "left_out": ("the environment exited normally but ran 4 of the 5 recorded rollouts", 1),
    # only its header, and a command that runs no step (finding 24 of issue 36): nothing was
    # recorded, nothing ran, and that is no pass either
    "header_only": ("the cassette holds no recording and the run made no request", 0),
}


def _make_case(project: Path, case: str) -> Path:
    """``cassettes/<case>/process.jsonl``: the recording, broken the way ``case`` says."""
    cassette = project / "cassettes" / case / "process.jsonl"
    cassette.parent.mkdir(parents=True)
    shutil.copy(project / CASSETTE_REL, cassette)
    if case == "crash":
        edit_command(cassette, lambda argv: [*argv, "--env.crash_in", "setup"])
    elif case == "no_rollout":
        edit_command(cassette, lambda argv: [*argv, "--env.total_steps", "0"])
    elif case == "help":
        edit_command(cassette, lambda argv: [*argv, "--help"])
    elif case == "header_only":
        keep_only_header(cassette)
        edit_command(cassette, lambda argv: [*argv, "--env.total_steps", "0"])
    else:
        add_rollout_the_run_skips(cassette)
    return cassette


def _all_cases(project: Path) -> dict[str, Path]:
    cases = {case: _make_case(project, case) for case in CASES}
    (project / CASSETTE_REL).unlink()  # only the broken ones are left to replay
    return cases


@pytest.mark.parametrize("case", list(CASES))
def test_run_cassette_raises_replay_failed(calc_project: Path, case: str) -> None:
    cassette = _make_case(calc_project, case)
    with pytest.raises(hermes_replay.ReplayFailed) as info:
        hermes_replay.run_cassette(cassette, out_dir=calc_project / "out")
    error, (says, never_ran) = info.value, CASES[case]
    text = str(error)
    assert isinstance(error, hermes_replay.HermesReplayError)
    assert text.startswith(f"cassettes/{case}/process.jsonl: the replay did not really run")
    assert says in text and "next step:" in text
    assert len(error.never_ran) == never_ran
    assert all(rid in text for rid in error.never_ran)
    if case == "crash":
        assert error.exit_code == 1
        assert "RuntimeError: calc env: setup failed on purpose" in text  # from the log tail
    if case == "left_out":
        (skipped,) = error.never_ran
        assert skipped.endswith("-2") and "1 of 5 recorded rollout(s) never ran" in text
    # the explicit opt-out: the raw result, the error beside it
    raw = hermes_replay.run_cassette(cassette, out_dir=calc_project / "raw",
                                     raise_errors=False)
    assert isinstance(raw.error, hermes_replay.ReplayFailed)
    same = 2 if never_ran else 1  # then the log's path, which differs
    assert str(raw.error).splitlines()[:same] == text.splitlines()[:same]


def test_cli_exits_1_with_the_same_text(calc_project: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    cases = _all_cases(calc_project)
    assert main(["replay", "cassettes", "--out", "out"]) == 1
    captured = capsys.readouterr()
    for case, cassette in cases.items():
        says = CASES[case][0]
        assert f"hermes-replay replay: cassettes/{case}/process.jsonl: the replay did not " \
               f"really run: {says}" in captured.err
        row = next(line for line in captured.out.splitlines()
                   if line.startswith(str(cassette.relative_to(calc_project))))
        assert row.rstrip().endswith("ERROR"), row
    assert " ok" not in captured.out


README_TEST = """
import pytest
from hermes_replay.snapshot import RolloutSnapshotExtension

@pytest.mark.parametrize("case", {cases!r})
def test_rewards_did_not_move(case, replay_run, snapshot):
    result = replay_run(f"cassettes/{{case}}/process.jsonl")
    assert all(0.0 <= r <= 1.0 for r in result.rewards.values())
    assert result == snapshot(extension_class=RolloutSnapshotExtension)
"""


def test_pytest_plugin_fails_each_case_and_writes_no_snapshot(
        calc_project: Path, pytester: pytest.Pytester) -> None:
    _all_cases(calc_project)
    for item in calc_project.iterdir():
        shutil.move(str(item), pytester.path / item.name)
    pytester.makepyfile(test_rewards=README_TEST.format(cases=list(CASES)))
    result = pytester.runpytest("--snapshot-update", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=len(CASES))
    text = "\n".join(result.outlines)
    for case, (says, _) in CASES.items():
        assert f"ReplayFailed: cassettes/{case}/process.jsonl: the replay did not really run: " \
               f"{says}" in text
    assert not list(pytester.path.rglob("*.rollouts.txt"))  # nothing empty was written


def test_a_crashed_replays_next_step_stays_offline(calc_project, capsys) -> None:
    """Debugging a replay's crash must not mean running the env's CLI with the recorded
    endpoint in its flags (live requests to a paid API): the hint is the same replay, -v."""
    from _calc_project import PROCESS_ARGS

    from hermes_replay.cli import main

    code = main(["replay", "environments/calc_tool_env.py", "--cassette",
                 "cassettes/calc_tool_env/process.jsonl", "-v", "--", *PROCESS_ARGS,
                 "--env.crash_in", "setup"])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1
    hint = next(line for line in text.splitlines() if "Next step: run `" in line)
    assert "`hermes-replay replay environments/calc_tool_env.py --cassette " \
           "cassettes/calc_tool_env/process.jsonl -v -- process" in hint
    assert "python " not in hint and "hermes-replay-offline" not in hint
