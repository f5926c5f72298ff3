"""Drives recorder subprocesses that overlap on purpose (shared by the concurrency tests).

Each recorder opens its cassette, reports ``open``, waits for a shared "go" file (so all
of them are inside their ``cassette()`` block before any records), records ``n``
interactions in rollouts named after its prefix, and reports ``committed`` — or the first
line of the error that stopped it, and exits 3.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

RECORDER = r'''
import os, sys, time
import httpx
import hermes_replay

path, base, prefix, n, progress, go = sys.argv[1:]
out = open(progress, "w", buffering=1)
try:
    with hermes_replay.cassette(path, "record", header={"env_name": prefix}):
        out.write("open\n")
        deadline = time.monotonic() + 30
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.01)
        with httpx.Client() as client:
            for i in range(int(n)):
                with hermes_replay.rollout(f"{prefix}-{i % 2}"):
                    client.post(base + "/chat/completions", json={
                        "model": "m", "messages": [{"role": "user",
                                                    "content": f"{prefix} turn {i}"}]})
                time.sleep(0.005)  # interleave with the other recorder
    out.write("committed\n")
except Exception as exc:
    out.write("error " + " ".join(str(exc).split())[:500] + "\n")
    sys.exit(3)
'''


def run_recorders(tmp: Path, base: str, jobs: list[tuple[Path, str]], n: int
                  ) -> list[tuple[int, str]]:
    """Run one recorder per ``(cassette path, prefix)`` at once; ``(exit code, progress)``."""
    script = tmp / "recorder.py"
    script.write_text(RECORDER)
    go = tmp / "go"
    procs = []
    for i, (path, prefix) in enumerate(jobs):
        progress = tmp / f"progress{i}"
        procs.append((subprocess.Popen([sys.executable, str(script), str(path), base, prefix,
                                        str(n), str(progress), str(go)]), progress))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        texts = [p.read_text() if p.exists() else "" for _, p in procs]
        if all(("open" in t or "error" in t) for t in texts) or any(
                proc.poll() is not None for proc, _ in procs):
            break
        time.sleep(0.02)
    go.write_text("go")
    results = []
    for proc, progress in procs:
        code = proc.wait(60)
        results.append((code, progress.read_text() if progress.exists() else ""))
    return results
