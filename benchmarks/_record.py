"""Recording overhead: the same requests to the scripted endpoint on loopback, through an SDK
client whose transport is not intercepted (pass-through: the SDK talking to the endpoint) and
through one that a ``hermes_replay.cassette(mode="record")`` records, alternating group by
group in one event loop so machine noise hits both alike. The endpoint runs in a child
process (``python -m benchmarks._record N TURNS``); its CPU is read from /proc per group.

The endpoint answers every request with the synthetic reply of that conversation (a script of
one rule), so the recorded responses have the size and shape of the synthetic traffic.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2

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


# The SDK's own HTTP path, captured before any cassette patches it: pass-through requests
# go through exactly this, recorded ones through the patched method.
_ORIGINAL = httpx2.AsyncHTTPTransport.handle_async_request


class _Unrecorded(httpx2.AsyncHTTPTransport):
    """The default transport with no interception: the pass-through baseline."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await _ORIGINAL(self, request)


async def _paired(base_url: str, rollouts: list[Rollout],
                  pid: int) -> dict[str, tuple[float, float, float]]:
    """Pass-through and recording side by side (the recording cassette is open throughout):
    (wall, client CPU, endpoint CPU) per mode."""
    async with _drivers.client(_Unrecorded(), base_url) as plain, \
            _drivers.client(None, base_url) as recorded:
        return await _drivers.paired({"passthrough": plain, "record": recorded}, rollouts,
                                     check=False, meter=lambda: _child_cpu(pid))


def _run(base_url: str, rollouts: list[Rollout], cassette: Path,
         pid: int) -> dict[str, tuple[float, float, float]]:
    with hermes_replay.cassette(cassette, mode="record") as session:
        times = asyncio.run(_paired(base_url, rollouts, pid))
    assert session.summary().recorded == sum(len(r.requests) for r in rollouts)
    return times


def measure(rollouts: list[Rollout], reps: int) -> dict[str, list[tuple[float, float, float]]]:
    """``{"passthrough": [(wall, client CPU, endpoint CPU)…], "record": [...]}``, one entry
    per paired run. The endpoint runs in its own process (as a model server does), so the
    client's CPU is the SDK's plus, when recording, the recorder's."""
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
            _run(base_url, rollouts[:16], Path(tmp) / "warm.jsonl", proc.pid)  # warm up
            for rep in range(reps):
                for mode, timing in _run(base_url, rollouts, Path(tmp) / f"rec{rep}.jsonl",
                                         proc.pid).items():
                    out[mode].append(timing)
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
