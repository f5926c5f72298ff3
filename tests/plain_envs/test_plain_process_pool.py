"""An env with its own process pool replays under the main job's ``-j`` workers (issue 45,
item 2).

``process_pool_env`` grades every reply in a ``ProcessPoolExecutor`` it makes in ``setup``, as
math_server_zero does. ``replay DIR -j 2`` used to run each cassette in a daemonic worker,
where that pool dies with ``daemonic processes are not allowed to have children``: an ERROR
row, though the env's own ``python -m … process`` runs fine. The oracle is the env's rule,
written again here and applied to each rollout's own recorded reply.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from _plain_script import plain_script
from _proc_table import command_line
from _sum_oracle import env_rule, own_rollouts

from hermes_replay import bundled_tokenizer_path
from hermes_replay.cli import main
from hermes_replay.scripted_endpoint import ScriptedEndpoint

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent


def test_an_env_with_its_own_process_pool_replays_under_j(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    (root / "envs" / "cassettes").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'users-envs'\nversion = '0'\n")
    for name in ("process_pool_env.py", "arith_chat_env.py"):
        shutil.copy(HERE / name, root / "envs" / name)
    monkeypatch.chdir(root / "envs")
    cassettes = [root / "envs" / "cassettes" / f"pool{k}.jsonl" for k in (1, 2)]
    try:
        for k, cassette in enumerate(cassettes):
            with ScriptedEndpoint(script=plain_script(), seed=k) as endpoint:
                code = main(["record", "process_pool_env.py", "--cassette", str(cassette),
                             "--endpoint", endpoint.base_url, "--model", "scripted", "--",
                             "process", "--env.tokenizer_name", str(bundled_tokenizer_path()),
                             "--env.total_steps", "2", "--env.group_size", "4",
                             "--env.data_path_to_save_groups", f"out{k}/groups.jsonl"])
            assert code == 0, capsys.readouterr().err[-3000:]
    finally:
        import wandb

        if wandb.run is not None:
            wandb.finish()
    oracle = {}
    for cassette in cassettes:  # the recording itself is right, so a replay can be judged by it
        rewards = {rid: (outcome["reward"], env_rule(question, reply))
                   for rid, (question, reply, outcome) in own_rollouts(cassette).items()
                   if "reward" in outcome}
        assert len(rewards) >= 4 and all(got == rule for got, rule in rewards.values()), rewards
        oracle[cassette.name] = [rule for _got, rule in rewards.values()]
    capsys.readouterr()
    out = tmp_path / "replayed"
    before = _processes_of(tmp_path)  # the records' pools, in this process
    code = main(["replay", str(root / "envs" / "cassettes"), "-j", "2", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out[-3000:] + printed.err[-3000:]
    assert "daemonic" not in printed.out + printed.err
    assert "2 cassettes in 2 processes" in printed.err  # the pool ran them, not this process
    rows = {row["rel"]: row["summary"] for row in
            json.loads((out / "replay.json").read_text())["rows"]}
    assert sorted(rows) == sorted(oracle)
    for name, summary in rows.items():
        assert summary["error"] is None and summary["misses"] == 0 and summary["unused"] == 0
        assert summary["changed"] == {} and summary["rollouts"] == len(oracle[name])
        rule = oracle[name]
        assert summary["mean_reward"] == pytest.approx(sum(rule) / len(rule))
    # The workers ended the pools the envs left (which only interpreter exit shuts down): a
    # worker waited on its idle pool until killed 30 s later, and the pool's fork server and
    # worker ran on with no parent. The records ran in this process, whose pools stay.
    left = _processes_of(tmp_path, besides=before)
    assert left == [], [command_line(pid) for pid in left]


def _processes_of(folder: Path, besides: list[int] | None = None, wait: float = 10
                  ) -> list[int]:
    """Live processes, other than ``besides`` and this process's children, that work in
    ``folder`` or were started with it on their command line (a fork server's ``sys_path``);
    waits up to ``wait`` seconds for them to go when ``besides`` is given."""
    deadline = time.monotonic() + (wait if besides is not None else 0)
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid() or int(entry) in (besides or []):
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                cwd = os.readlink(f"/proc/{entry}/cwd")
                state, ppid = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1] \
                    .split()[:2]
            except OSError:
                continue
            if int(ppid) == os.getpid():
                continue  # this process's own fork server and resource tracker: its to end
            if state != "Z" and (str(folder).encode() in cmdline
                                 or cwd.startswith(str(folder))):
                found.append(int(entry))
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)
