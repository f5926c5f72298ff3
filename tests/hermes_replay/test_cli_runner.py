"""Pieces of the run commands that need no cassette: argv handling, progress, summary."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_replay._cli._runner import redact_command
from hermes_replay._cli.replay import NOTHING_RECORDED
from hermes_replay._corpus.summary import RunSummary
from hermes_replay._runner.envrun import run_env_file
from hermes_replay._runner.plan import (
    changed_rewards,
    find_cassettes,
    find_env_file,
    redirect_outputs,
    replay_argv,
)
from hermes_replay._terminal.render import Progress, Style, table
from hermes_replay.cli import main


def test_env_cli_runs_in_process_with_its_argv_and_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "env_cli.py"
    script.write_text(
        "import sys, helper_mod\n"
        "open(sys.argv[-1], 'w').write(repr(sys.argv[1:]) + helper_mod.X)\n"
        "raise SystemExit(3)\n",
        encoding="utf-8",
    )
    (tmp_path / "helper_mod.py").write_text("X = '!'\n", encoding="utf-8")
    out = tmp_path / "argv.txt"
    saved = sys.argv[:]
    assert run_env_file(script, ["process", "--env.x", "1", str(out)]) == 3
    assert out.read_text() == repr(["process", "--env.x", "1", str(out)]) + "!"
    assert sys.argv == saved  # restored
    sys.modules.pop("helper_mod", None)


def test_env_crash_returns_1_with_next_step(tmp_path: Path, capsys) -> None:
    script = tmp_path / "crash_env.py"
    script.write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    assert run_env_file(script, ["process"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and "Next step: run `python" in err


def test_replay_argv_adds_recorded_endpoint_and_placeholder_key() -> None:
    recorded = ["process", "--env.total_steps", "2", "--openai.base_url", "http://h/v1",
                "--openai.model_name", "m", "--openai.api_key", "<redacted>"]
    argv = replay_argv(recorded)
    assert argv[:7] == recorded[:7]
    assert "<redacted>" not in argv and "--openai.api_key=hermes-replay-offline" in argv
    assert argv[-2:] == ["--openai.health_check", "false"]  # offline: nothing to ping
    pinging = replay_argv([*recorded, "--openai.health_check", "true"])
    assert "true" not in pinging and pinging[-2:] == ["--openai.health_check", "false"]
    mine = replay_argv(recorded, ["process", "--env.total_steps", "5"])
    assert mine[:3] == ["process", "--env.total_steps", "5"]
    assert "--openai.model_name" in mine and "m" in mine
    # no --openai.* at all (e.g. a multi-server env): add nothing, atroposlib would refuse it
    assert replay_argv(["evaluate"]) == ["evaluate"]


def test_redirect_outputs_moves_or_adds_output_paths(tmp_path: Path) -> None:
    argv = redirect_outputs(["process", "--env.data_path_to_save_groups=data/g.jsonl",
                             "--env.total_steps", "2"], tmp_path)
    assert argv == ["process", "--env.total_steps", "2", "--env.data_path_to_save_groups",
                    str(tmp_path / "g.jsonl")]
    assert redirect_outputs(["process"], tmp_path)[-1] == str(tmp_path / "groups.jsonl")
    ev = redirect_outputs(["evaluate", "--env.data_dir_to_save_evals", "/tmp/x"], tmp_path)
    assert ev == ["evaluate", "--env.data_dir_to_save_evals", str(tmp_path / "x")]
    assert redirect_outputs(["serve"], tmp_path) == ["serve"]


def test_redact_command_hides_keys() -> None:
    assert redact_command(["process", "--openai.api_key", "sk-1", "--openai.api_key=sk-2"]) == [
        "process", "--openai.api_key", "<redacted>", "--openai.api_key=<redacted>"]


def test_changed_rewards_only_for_recorded_rollouts() -> None:
    assert changed_rewards({"a": 1.0, "b": 0.5, "c": None}, {"a": 1.0, "b": 0.0, "c": 1.0,
                                                              "new": 1.0}) == {
        "b": (0.5, 0.0), "c": (None, 1.0)}


def test_find_env_file_looks_only_in_trusted_folders(tmp_path, monkeypatch) -> None:
    from conftest import trust

    from hermes_replay._runner.plan import UntrustedProject

    (tmp_path / "environments").mkdir()
    env = tmp_path / "environments" / "x_env.py"
    env.write_text("from atroposlib.envs.base import BaseEnv\n\nclass XEnv(BaseEnv):\n    pass\n",
                   encoding="utf-8")
    cassette = tmp_path / "cassettes" / "x_env" / "process.jsonl"
    cassette.parent.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UntrustedProject, match=f"hermes-replay trust {tmp_path}"):
        find_env_file("environments/x_env.py", cassette)  # a marker would not change that
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    with pytest.raises(UntrustedProject):
        find_env_file("environments/x_env.py", cassette)
    trust(tmp_path)
    assert find_env_file("environments/x_env.py", cassette) == env
    monkeypatch.chdir(cassette.parent)  # from any folder below the trusted one
    assert find_env_file("environments/x_env.py", cassette) == env
    assert find_env_file("environments/none.py", cassette) is None


def test_find_env_file_refuses_paths_outside_the_project(tmp_path, monkeypatch) -> None:
    import pytest

    from hermes_replay._runner.plan import UnsafeEnvFile

    monkeypatch.chdir(tmp_path)
    cassette = tmp_path / "cassettes" / "c.jsonl"
    (tmp_path / "outside.py").write_text("", encoding="utf-8")
    for bad in (str(tmp_path / "outside.py"), "../outside.py", "a/../../outside.py"):
        with pytest.raises(UnsafeEnvFile, match="outside the project"):
            find_env_file(bad, cassette)
    (tmp_path / "proj").mkdir()
    from conftest import trust

    trust(tmp_path / "proj")
    (tmp_path / "proj" / "link_env.py").symlink_to(tmp_path / "outside.py")
    monkeypatch.chdir(tmp_path / "proj")
    with pytest.raises(UnsafeEnvFile, match="is a link"):
        find_env_file("link_env.py", tmp_path / "proj" / "c.jsonl")


def test_find_cassettes_skips_non_cassette_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"type": "header", "schema_version": 1}\n')
    (tmp_path / "data.jsonl").write_text('{"tokens": [1]}\n')
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "b.jsonl").write_text('{"type": "header", "schema_version": 1}\n')
    assert find_cassettes(tmp_path) == [tmp_path / "a.jsonl"]


def test_find_cassettes_skips_data_whose_first_line_is_longer_than_any_header(
        tmp_path: Path) -> None:
    # the scored group of a 1 MB reply, as a probe's replay writes it to its output folder
    (tmp_path / "a.jsonl").write_text('{"type": "header", "schema_version": 1}\n')
    (tmp_path / "groups.jsonl").write_text('{"tokens": [' + "7, " * 600_000 + "7]}\n")
    # … while a cassette cut short (or a huge header) is still found, for load_cassette to judge
    (tmp_path / "cut.jsonl").write_text('{"type": "header", "schema_version": 1, "x": "' +
                                        "y" * (1 << 20))
    assert find_cassettes(tmp_path) == [tmp_path / "a.jsonl", tmp_path / "cut.jsonl"]


def test_progress_plain_lines_are_periodic() -> None:
    now = [0.0]
    stream = io.StringIO()
    p = Progress(stream, label="replaying x", interval=5.0, tty=False, clock=lambda: now[0])
    p.rollout_done("r0", {"turns_used": 2})
    assert stream.getvalue() == ""  # too soon
    now[0] = 6.0
    p.rollout_done("r1", {"turns_used": 3})
    assert stream.getvalue() == "[hermes-replay] replaying x: 2 rollouts done · 5 turns · " \
                                "0 misses · 6s\n"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _screen(text: str) -> str:
    """What the escape-coded output says, without its cursor moves and colors."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_progress_on_a_terminal_is_a_rich_bar_that_goes_away() -> None:
    stream = _Terminal()
    p = Progress(stream, label="x.jsonl", tty=True)
    p.miss_count = lambda: 4
    p.start()
    p.event({"kind": "loaded", "rollout": None, "seq": 12})
    p.rollout_done("r0", {"turns_used": 1})
    p.rollout_done("r1", {})
    p.close()
    frames = _screen(stream.getvalue()).split("\r")
    assert any("x.jsonl" in f and "━" in f and "2/12 rollouts · 1 turns · 4 misses" in f
               for f in frames), frames
    assert stream.getvalue().endswith("\x1b[2K")  # transient: the summary starts on a clean line


def test_summary_lines_name_everything() -> None:
    s = RunSummary(mode="replay", cassette="c.jsonl", rollouts=8, turns=20, misses=1, unused=2,
                   mean_reward=0.625, changed={"train-x-0-1": (1.0, 0.0)})
    text = "\n".join(s.lines(Style(color=False)))
    assert "8 rollouts replayed · 20 turns · 1 misses · 2 unused recordings · " \
           "mean reward 0.625" in text
    assert "reward changed train-x-0-1: 1.000 -> 0.000" in text


def test_replay_of_empty_dir_fails_as_verify_does(tmp_path: Path, capsys) -> None:
    """An empty folder replays nothing: exit 2 like ``verify`` (it was 0, so a CI step that
    replayed nothing passed — issue 36, finding 23), once and ``--twice``."""
    for extra in ([], ["--twice"]):
        assert main(["replay", str(tmp_path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"no cassette in {tmp_path}, so nothing was replayed" in err
        assert NOTHING_RECORDED in err and "Next step" in err
    assert main(["verify", str(tmp_path)]) == 2


def test_trace_is_for_one_env_run_not_a_folder(tmp_path: Path, capsys) -> None:
    """``--trace FILE`` records one run (``ENV_FILE -- MODE``); a folder has many runs, so
    it is a usage error naming the form it goes with, and no file is written."""
    trace = tmp_path / "trace.jsonl"
    assert main(["replay", str(tmp_path), "--trace", str(trace)]) == 2
    assert "--trace goes with ENV_FILE -- MODE" in capsys.readouterr().err
    assert not trace.exists()


def test_replay_default_dir_missing_fails_too(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["replay"]) == 2
    assert "nothing recorded yet — record one with: hermes-replay record" in \
        capsys.readouterr().err
    assert main(["replay", "no/such/dir"]) == 2


def test_console_script_smoke(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("hermes-replay")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "hermes_replay.cli"]
    proc = subprocess.run([*cmd, "replay", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "nothing recorded yet" in proc.stderr
    proc = subprocess.run([*cmd, "record", str(tmp_path / "x_env.py"), "--", "process"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_progress_counts_session_events() -> None:
    from types import SimpleNamespace

    stream = io.StringIO()
    p = Progress(stream, tty=False, interval=0.0, clock=lambda: 1.0)
    for kind, rollout in [("hit", "r0"), ("hit", "r0"), ("miss", "r1"), ("hit", None)]:
        p.event(SimpleNamespace(kind=kind, rollout=rollout))
    assert stream.getvalue().splitlines()[-1].endswith("0 rollouts done · 2 turns · 1 misses · 0s")


def test_progress_bar_refreshes_alone_and_env_output_scrolls_above_it() -> None:
    import time as _time

    stream = _Terminal()
    p = Progress(stream, label="rec", tty=True)
    p.start()
    for _ in range(500):  # rich redraws with no events at all
        if "rec" in _screen(stream.getvalue()):
            break
        _time.sleep(0.02)
    assert "0 rollouts done" in _screen(stream.getvalue())
    terminal_out, piped_out = _Terminal(), io.StringIO()
    p.above(terminal_out).write("env says hi\n")
    assert p.above(piped_out) is piped_out  # not the screen: written as is
    before = len(stream.getvalue())
    p.close()
    # printed through the bar's console: above the bar, never inside its line
    assert "env says hi" in _screen(stream.getvalue()) and terminal_out.getvalue() == ""
    assert "env says hi" not in stream.getvalue()[before:]
    assert p._bar is None


def test_plain_table_has_no_escape_codes_and_never_wraps() -> None:
    long_id = "train-" + "x" * 300
    text = table(["rollout", "reward"], [[long_id, "0.500"], ["b", "1.000"]], align="lr",
                 style=Style(color=False))
    width = len(long_id)  # the first column: two spaces, then "reward" right-aligned
    assert text.splitlines() == [
        "rollout".ljust(width) + "  reward",
        "-" * (width + 2 + len("reward")),
        f"{long_id}   0.500",
        "b".ljust(width) + "   1.000",
    ]


def test_terminal_table_is_drawn_by_rich_and_aligns_colored_cells() -> None:
    style = Style(color=True)
    text = table(["name", "status"], [["a", style("ok", "green")], ["bbb", "CHANGED"]],
                 style=style)
    lines = [_screen(line).rstrip() for line in text.splitlines()]
    assert lines == ["name  status", "─" * 13, "a     ok", "bbb   CHANGED"]
    assert "\x1b[32mok\x1b[0m" in text and "\x1b[1m" in text.splitlines()[0]


def test_progress_shows_totals_from_the_cassette_and_counts_each_miss_once() -> None:
    from hermes_replay import ReplayEvent

    stream = io.StringIO()
    p = Progress(stream, tty=False, interval=0.0, clock=lambda: 1.0)
    p.event(ReplayEvent("loaded", None, 12, "", "c.jsonl"))  # the session opened its cassette
    for rid in ("a", "b", "c"):
        p.rollout_done(rid, {"turns_used": 2})
    p.event(ReplayEvent("miss", "d", 0, "POST", "/v1/chat/completions"))
    assert stream.getvalue().splitlines()[-1].endswith("3/12 rollouts · 6 turns · 1 misses · 0s")


def test_progress_counts_any_unit() -> None:
    stream = io.StringIO()
    p = Progress(stream, tty=False, interval=0.0, clock=lambda: 1.0, unit="cassettes")
    p.total = 5
    p.item_done(turns=8, misses=1)
    p.item_done(turns=4)
    assert stream.getvalue().splitlines()[-1].endswith("2/5 cassettes · 12 turns · 1 misses · 0s")


@pytest.mark.parametrize("command", ["replay", "ls"])
def test_a_fifo_given_as_cassettes_is_refused_not_an_empty_project(tmp_path: Path, capsys,
                                                                     command: str) -> None:
    """A FIFO is no project at all: reading it would block, and 'nothing recorded' there
    would pass a run that ran nothing."""
    fifo = tmp_path / "c.jsonl"
    os.mkfifo(fifo)
    assert main([command, str(fifo)]) == 2
    err = capsys.readouterr().err
    assert f"{fifo} is a FIFO" in err and "Next step" in err


def test_show_of_a_fifo_ends_with_an_error_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes: ``show`` hung forever on one.
    Run as a process, so a regression shows as a timeout, not a stuck test session."""
    fifo = tmp_path / "c.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "hermes_replay.cli", "show", str(fifo)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "a FIFO, not a regular file" in proc.stderr and "next step" in proc.stderr
