"""What recording the world costs (issue 44 item 8), measured side by side in one run.

    .venv/bin/python benchmarks/workspace_bench.py [--reps 5] [--rollouts 100] [--quick]

1. Recorder time per rollout with a 1 MiB workspace: ``capture_workspace`` into a fresh store
   (the first rollout) and into a store that already holds the files (every later rollout of
   a group over the same checkout), beside one command run in a fresh bubblewrap sandbox —
   what one agent tool call costs anyway.
2. Bytes for N rollouts over one shared 1 MiB checkout (each with its own answer.txt) against
   one rollout: the store plus the manifests the cassette keeps.
3. Replay of an unchanged cassette with workspaces and the same cassette without them
   (``tests/world/answer_env.py``, recorded against the scripted endpoint), alternating runs:
   the workspace is not read unless a reward changed, so the two should be within noise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "hermes_replay"))

from hermes_replay._world import BlobStore, capture_workspace  # noqa: E402
from hermes_replay._world.trees import store_tree  # noqa: E402

MIB = 1024 * 1024


def checkout(root: Path, seed: int = 0) -> None:
    """A 1 MiB source tree: 64 text files of 16 KiB in 8 folders."""
    rng = random.Random(seed)
    words = ["def", "return", "self", "value", "index", "import", "class", "for", "in", "if"]
    for n in range(64):
        folder = root / f"pkg{n % 8}"
        folder.mkdir(parents=True, exist_ok=True)
        text = " ".join(rng.choice(words) for _ in range(4000))[: 16 * 1024]
        (folder / f"mod{n}.py").write_text(text.ljust(16 * 1024))


def timed(fn, reps: int) -> float:
    runs = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def capture_cost(reps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        checkout(work)

        def cold() -> None:
            shutil.rmtree(Path(tmp) / "cold", ignore_errors=True)
            capture_workspace(work, BlobStore(Path(tmp) / "cold"))

        warm_store = BlobStore(Path(tmp) / "warm")
        capture_workspace(work, warm_store)
        t_cold = timed(cold, reps)
        t_warm = timed(lambda: capture_workspace(work, warm_store), reps)
        t_cmd = sandbox_command(reps)
    print(f"1. recorder time per rollout, 1 MiB workspace (median of {reps})")
    print(f"   capture, new store        {t_cold * 1000:8.1f} ms")
    print(f"   capture, files stored     {t_warm * 1000:8.1f} ms")
    if t_cmd is not None:
        print(f"   one sandboxed command     {t_cmd * 1000:8.1f} ms   "
              "(a fresh bwrap sandbox, `true`)")
        print(f"   ratio capture/command     {t_cold / t_cmd:8.2f} (new store)  "
              f"{t_warm / t_cmd:.2f} (stored)")


def sandbox_command(reps: int) -> float | None:
    try:
        from environments.tools.sandbox import cleanup_sandbox, get_sandbox
        from environments.tools.sandbox.isolation import bwrap_problem
    except ImportError:
        return None
    if bwrap_problem() is not None:
        return None
    os.environ["HERMES_SANDBOX"] = "bwrap"
    counter = iter(range(10**6))

    def once() -> None:
        task = f"bench-{next(counter)}"
        get_sandbox(task).run("true")
        cleanup_sandbox(task)

    return timed(once, reps)


def shared_bytes(rollouts: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "checkout"
        checkout(base)

        def run(count: int, store_dir: Path) -> int:
            store = BlobStore(store_dir)
            manifests = 0
            for n in range(count):
                work = Path(tmp) / f"w{n}"
                shutil.copytree(base, work)
                (work / "answer.txt").write_text(f"{n}\n")
                ws = capture_workspace(work, store)
                manifests += len(json.dumps(store_tree(ws, store)))
                shutil.rmtree(work)
            stored = sum(p.stat().st_size for p in store_dir.rglob("*") if p.is_file())
            return stored + manifests

        one = run(1, Path(tmp) / "one")
        many = run(rollouts, Path(tmp) / "many")
    print("2. bytes for rollouts over one shared 1 MiB checkout (store + manifests)")
    print(f"   1 rollout                 {one:>12,}")
    print(f"   {rollouts} rollouts              {many:>12,}")
    print(f"   ratio                     {many / one:8.2f}  (target: about one copy, <= 1.5)")


def replay_cost(reps: int) -> None:
    import _world_project as W

    from hermes_replay.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        root = W.make_project(Path(tmp) / "proj")
        os.chdir(root)
        code = W.record()
        assert code == 0, "recording the bench cassette failed"
        main(["trust", str(root)])
        plain = root / "cassettes" / "answer_env" / "bare.jsonl"
        lines = []
        for line in (root / W.CASSETTE_REL).read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "outcome":
                record.pop("workspace", None)
            lines.append(json.dumps(record))
        plain.write_text("\n".join(lines) + "\n")
        times: dict[str, list[float]] = {"with workspaces": [], "without": []}
        cpu: dict[str, list[float]] = {"with workspaces": [], "without": []}
        # a first replay in a process imports the stack (~0.3 s of CPU): not either form's
        assert main(["replay", str(plain), "--out", "out-warm"]) == 0
        pair = [("with workspaces", W.CASSETTE_REL), ("without", str(plain))]
        for rep in range(reps):  # ABBA: neither form always runs first
            for label, path in (pair if rep % 2 == 0 else pair[::-1]):
                start, start_cpu = time.perf_counter(), _cpu()
                assert main(["replay", path, "--out", f"out-{label[:4]}"]) == 0
                times[label].append(time.perf_counter() - start)
                cpu[label].append(_cpu() - start_cpu)
    a, b = (statistics.median(times[k]) for k in ("with workspaces", "without"))
    ca, cb = (statistics.median(cpu[k]) for k in ("with workspaces", "without"))
    print(f"3. replay of an unchanged cassette, ABBA order, median of {reps} (wall / CPU)")
    print(f"   with workspaces           {a:8.2f} s  {ca:8.2f} s")
    print(f"   without                   {b:8.2f} s  {cb:8.2f} s")
    print(f"   ratio                     {a / b:8.3f}    {ca / cb:8.3f}  (target: within noise)")


def _cpu() -> float:
    """CPU seconds of this process and its finished children (a replay may run a child)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main_(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rollouts", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = parser.parse_args(argv)
    reps, rollouts = (1, 5) if args.quick else (args.reps, args.rollouts)
    capture_cost(reps)
    shared_bytes(rollouts)
    replay_cost(reps if not args.quick else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv[1:]))
