"""Recording overhead: the same request sequence to the scripted endpoint on loopback, once
with no cassette (pass-through: the SDK talking to the endpoint) and once inside
``hermes_replay.cassette(mode="record")``, in interleaved runs so machine noise hits both.
The endpoint runs in a child process (``python -m benchmarks._record N TURNS``).

The endpoint answers every request with the synthetic reply of that conversation (a script of
one rule), so the recorded responses have the size and shape of the synthetic traffic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import hermes_replay
from benchmarks import _drivers
from benchmarks._synthetic import Rollout
from hermes_replay.scripted_endpoint import Conversation, Reply, Rule, Script, ScriptedEndpoint


def _key(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, sort_keys=True)


def replay_script(rollouts: list[Rollout]) -> Script:
    """A script that says, for each conversation of ``rollouts``, what the synthetic model did."""
    replies: dict[str, Reply] = {}
    for ro in rollouts:
        for body, resp in zip(ro.requests, ro.responses, strict=True):
            msg = resp["choices"][0]["message"]
            calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                     for c in msg.get("tool_calls") or []]
            replies.setdefault(_key(body["messages"]), Reply(content=msg.get("content"),
                                                             tool_calls=calls))

    def reply(conv: Conversation, rng: Any) -> Reply:
        return replies[_key(conv.messages)]

    return Script("benchmark-synthetic", [Rule("synthetic", lambda conv: True, reply)])


def _child_cpu(pid: int) -> float:
    """CPU seconds (user + system) the endpoint process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(base_url: str, rollouts: list[Rollout], cassette: Path | None,
         pid: int) -> tuple[float, float, float]:
    """(wall s, this process's CPU s, endpoint process CPU s) for one run."""
    before = _child_cpu(pid)
    if cassette is None:
        wall, cpu = _drivers.run(rollouts, base_url=base_url, check=False)
    else:
        with hermes_replay.cassette(cassette, mode="record") as session:
            wall, cpu = _drivers.run(rollouts, base_url=base_url, check=False)
        assert session.summary().recorded == sum(len(r.requests) for r in rollouts)
    return wall, cpu, _child_cpu(pid) - before


def measure(rollouts: list[Rollout], reps: int) -> dict[str, list[tuple[float, float, float]]]:
    """``{"passthrough": [(wall, client CPU, endpoint CPU)…], "record": [...]}`` over
    ``reps`` interleaved runs. The endpoint runs in its own process (as a model server
    does), so the client's CPU is the SDK's plus, when recording, the recorder's."""
    out: dict[str, list[tuple[float, float, float]]] = {"passthrough": [], "record": []}
    n = sum(len(r.requests) for r in rollouts)
    turns = len(rollouts[0].requests)
    cmd = [sys.executable, "-m", "benchmarks._record", str(n), str(turns)]
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp, subprocess.Popen(
            cmd, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().strip()
            if not base_url.startswith("http"):
                raise RuntimeError(f"the endpoint process did not start (said {base_url!r})")
            _run(base_url, rollouts[:2], None, proc.pid)  # warm up both sides
            _run(base_url, rollouts[:2], Path(tmp) / "warm.jsonl", proc.pid)
            for rep in range(reps):
                order = ("passthrough", "record") if rep % 2 == 0 else ("record", "passthrough")
                for mode in order:
                    path = Path(tmp) / f"rec{rep}.jsonl" if mode == "record" else None
                    out[mode].append(_run(base_url, rollouts, path, proc.pid))
        finally:
            if proc.stdin is not None:
                proc.stdin.close()  # the endpoint process stops at EOF
            proc.wait(timeout=30)
    return out


def _serve(interactions: int, turns: int) -> None:
    """Child process: serve the synthetic script until stdin closes."""
    from benchmarks._synthetic import build_traffic

    rollouts = build_traffic(interactions, turns=turns)
    with ScriptedEndpoint(script=replay_script(rollouts), seed=0) as endpoint:
        print(endpoint.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
