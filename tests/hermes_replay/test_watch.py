"""``hermes-replay watch``, driven for real: the command in a subprocess, files edited as a user
saves them, each verdict read from its output (no timing is asserted; deadlines only stop a
hung watch).

One watch session walks the user's loop on the calc project (4 recorded rollouts): a reward
change (every rollout's old -> new), a change in a module the env imports (fresh in each run:
the warm process never imported it), a syntax error (shown, nothing replayed, still watching),
a prompt change (a miss with its diff), then Ctrl-C (exit 0, the warm process gone).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _ctrl_c import ctrl_c_reaches_children

ENV = Path("environments/calc_tool_env.py")
STATE = Path("environments/calc_state.py")
REWARD = "reward = 0.5 + 0.5 * called - 0.1 * len(result.tool_errors)"
DEADLINE = 180.0  # seconds a step may take on a loaded 2-core machine before the test gives up
# `rollout (item): old -> new` — the item's label beside the id (``_cassette/labels``)
_CHANGE = re.compile(r"^    (\S+)(?: \([^)]*\))?: (-?\d+\.\d+) -> (-?\d+\.\d+)$")


class _Watch:
    """The watch subprocess and its output, line by line."""

    def __init__(self, root: Path, *args: str, keys: bool = False) -> None:
        env = {**os.environ, "NO_COLOR": "1"}
        with ctrl_c_reaches_children():  # stopped with Ctrl-C
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("hermes-replay")), "watch", *args],
                cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                stdin=subprocess.PIPE if keys else subprocess.DEVNULL)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def until(self, pattern: str) -> list[str]:
        """The lines up to and including the first that matches ``pattern``."""
        got: list[str] = []
        end = time.monotonic() + DEADLINE
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line matching {pattern!r} in {DEADLINE:.0f} s; output so far:\n"
                            + "\n".join(self.seen))
            if line is None:
                pytest.fail(f"the watch exited ({self.proc.wait()}) before {pattern!r}:\n"
                            + "\n".join(self.seen))
            got.append(line)
            self.seen.append(line)
            if re.search(pattern, line):
                return got

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _save(path: Path, old: str, new: str) -> None:
    """Save as most editors do: a temp file beside it, renamed over it. (A truncate-and-write
    could be seen half-way on a loaded machine: an empty file is valid Python.)"""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    tmp = path.with_name(f".{path.name}.saving")
    tmp.write_text(text.replace(old, new, 1), encoding="utf-8")
    os.replace(tmp, path)


def _changes(lines: list[str]) -> dict[str, tuple[float, float]]:
    return {m[1]: (float(m[2]), float(m[3])) for line in lines if (m := _CHANGE.match(line))}


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


WAITING = r"waiting for changes$"


def test_watch_answers_each_save_with_its_verdict(calc_project: Path) -> None:
    (calc_project / "pyproject.toml").write_text("[project]\nname = 'calc'\n")
    (calc_project / STATE).write_text(
        (calc_project / STATE).read_text() + "\nBONUS = 0.0\n", encoding="utf-8")
    watch = _Watch(calc_project, "cassettes")
    try:
        first = watch.until(WAITING)
        assert any(line.startswith("ok ") and "calc_tool_env/process.jsonl" in line
                   and "4 rollouts" in line for line in first), first
        warm = _children(watch.proc.pid)

        # a reward change: one line per rollout, recorded -> now
        _save(calc_project / ENV, REWARD,
              "import calc_state\n        reward = 0.25 + 0.5 * called "
              "- 0.1 * len(result.tool_errors) + calc_state.BONUS")
        lines = watch.until(WAITING)
        assert any(line.startswith("CHANGED ") and "4 of 4 reward(s) moved" in line
                   for line in lines), lines
        moved = _changes(lines)
        assert len(moved) == 4, lines
        for old, new in moved.values():
            assert new == pytest.approx(old - 0.25, abs=1e-3)

        # a module the env imports: the run sees the saved value (imported fresh)
        _save(calc_project / STATE, "BONUS = 0.0", "BONUS = 0.25")
        lines = watch.until(WAITING)
        assert any("changed: environments/calc_state.py" in line for line in lines), lines
        assert any(line.startswith("ok ") and "calc_tool_env/process.jsonl" in line
                   for line in lines), lines

        # a syntax error: shown with file:line, nothing replayed, the watch goes on
        _save(calc_project / ENV, "called = any(", "called = any((")
        lines = watch.until(r"nothing replayed")
        syntax = next(line for line in lines if line.startswith("SYNTAX"))
        number = next(i for i, text in enumerate(
            (calc_project / ENV).read_text().splitlines(), 1) if "called = any((" in text)
        assert re.search(rf"calc_tool_env\.py:{number}(:\d+)?: SyntaxError", syntax), syntax
        _save(calc_project / ENV, "called = any((", "called = any(")
        lines = watch.until(WAITING)
        assert any(line.startswith("ok ") for line in lines), lines

        # a changed prompt: the request is not in the cassette; the miss shows its diff
        _save(calc_project / ENV, 'return item["question"]', 'return item["question"] + "!"')
        lines = watch.until(WAITING)
        assert any(line.startswith("MISS ") for line in lines), lines
        assert any(line.lstrip().startswith("+body.messages") and "Use the calculator.!" in line
                   for line in lines), lines
    finally:
        code = watch.stop()
    rest = watch.lines
    tail = []
    while (line := rest.get(timeout=10)) is not None:
        tail.append(line)
    assert code == 0, tail
    assert "hermes-replay watch: stopped." in tail, tail
    assert not any("Traceback" in line for line in watch.seen + tail), watch.seen + tail
    assert warm, "the watch started no warm process"
    for pid in warm:
        assert not Path(f"/proc/{pid}").exists(), f"warm process {pid} outlived the watch"


def test_the_accept_key_makes_the_current_rewards_the_baseline(calc_project: Path) -> None:
    """A moved reward shows once: after `a`, the next save compares with what was accepted."""
    (calc_project / "pyproject.toml").write_text("[project]\nname = 'calc'\n")
    watch = _Watch(calc_project, "cassettes", keys=True)
    try:
        watch.until(WAITING)
        _save(calc_project / ENV, REWARD, REWARD.replace("0.5 + 0.5", "0.25 + 0.5"))
        lines = watch.until(WAITING)
        assert any(line.startswith("CHANGED ") and "moved from the recording" in line
                   for line in lines), lines
        assert watch.proc.stdin is not None
        watch.proc.stdin.write("a")
        watch.proc.stdin.flush()
        lines = watch.until(r"^accepted ")
        assert "calc_tool_env/process.jsonl: 4 reward(s) for the rest of this watch" in lines[-1]
        # a save that changes no reward: ok against the accepted rewards, nothing shown as moved
        accepted = REWARD.replace("0.5 + 0.5", "0.25 + 0.5")
        _save(calc_project / ENV, accepted, accepted + "  # same reward")
        lines = watch.until(WAITING)
        assert any(line.startswith("ok ") and "as in the accepted rewards of this watch" in line
                   for line in lines), lines
        assert _changes(lines) == {}
    finally:
        assert watch.stop() == 0


def _recorded_rewards(cassette: Path) -> dict[str, float]:
    """Each rollout's reward as the cassette recorded it (its outcome lines, read here)."""
    import json

    rewards = {}
    for line in cassette.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "outcome" and record.get("reward") is not None:
            rewards[record["rollout"]] = float(record["reward"])
    return rewards


def test_cassettes_sharing_a_worker_each_show_their_own_rollouts_rewards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save's cassettes share a few workers (one after another in one process): each
    verdict must still be its own cassette's. Three shipped envs on two workers, each reward
    scaled by a module they all import; every moved rollout is checked against its own
    cassette's recorded reward times the new scale, under that cassette's verdict."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import watch_bench
    finally:
        sys.path.pop(0)
    monkeypatch.delenv("HERMES_REPLAY_TRUST", raising=False)  # make_project sets it: undone
    project = watch_bench.make_project(tmp_path / "project")
    recorded = {env: _recorded_rewards(project / "cassettes" / env / "process.jsonl")
                for env in watch_bench.ENVS}
    watch = _Watch(project, "cassettes", "-j", "2")
    try:
        first = watch.until(WAITING)
        assert sum(line.startswith("ok ") for line in first) == 3, first
        (project / "environments" / "reward_scale.py").write_text("SCALE = 0.5\n")
        lines = watch.until(WAITING)
    finally:
        watch.stop()
    blocks: dict[str, dict[str, tuple[float, float]]] = {}
    current = None
    for line in lines:
        if line.startswith("CHANGED "):
            current = next(env for env in watch_bench.ENVS if f"{env}/process.jsonl" in line)
            blocks[current] = {}
        elif current is not None and (m := _CHANGE.match(line)):
            blocks[current][m[1]] = (float(m[2]), float(m[3]))
        elif not line.startswith("    "):
            current = None
    assert sorted(blocks) == sorted(watch_bench.ENVS), lines
    for env, moved in blocks.items():
        assert set(moved) == {r for r, v in recorded[env].items() if v != 0.0}, (env, lines)
        for rollout, (old, new) in moved.items():
            assert old == pytest.approx(recorded[env][rollout], abs=1e-3), (env, rollout)
            assert new == pytest.approx(0.5 * recorded[env][rollout], abs=1e-3), (env, rollout)
