"""Replay at scale: ``replay DIR -j 2`` against ``--executor ray`` with 2 local workers, side by
side in one run, and a projection for 100,000 cassettes on 50 nodes.

    .venv/bin/python benchmarks/scale_bench.py [--cassettes 1000] [--reps 1] [--quick]
                                                [--against DIR]

The folder holds ``--cassettes`` cassettes: a few small ``process`` recordings made here first
against the scripted endpoint (three example environments, one group of two rollouts each),
copied to that many paths — each path a cassette of its own for the replay, as a regression
corpus of many small recordings is. Each timed run is the real CLI in a fresh process
(imports, every cassette's recorded command, outputs, the final table; ``--no-report``: the
page is the same work for both) and must exit 0 with every cassette ``ok``. Runs alternate
(ABAB…) so load from other processes falls on both; the ratio of medians is the result
(target: Ray's wall ≤ 1.25× that of ``-j 2`` on one machine). ``--against DIR`` times a
checkout of an earlier revision beside this tree, run for run, and prints this/DIR per side
(see ``_against``).

Ray's side starts its own local cluster each run (``--ray-address local``), which is part of
its wall. Ray's per-task overhead is measured apart (no-op calls on two warm actors), and
with the per-cassette cost measured by ``-j 2`` gives the projection printed at the end.

Ray picks a node's address itself and, on a machine with a network, takes its outward one; so
the whole benchmark runs in a network namespace whose only interface is loopback
(``unshare --net``, re-executing this script), where both sides see the same machine and
nothing can leave it. Ray's state outside the network is the run's own too: no inherited
``RAY_*`` variable, ``RAY_TMPDIR`` a folder of its own (sessions, sockets, the address file
``auto`` reads), and a token of its own for Ray's token authentication — a local
``ray.init()`` would otherwise write ``~/.ray/auth_token``, which turns token auth on for every
later ``ray start`` on the machine.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import secrets
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._against import check_against, code_env

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.25
EXAMPLES = ("multi_signal_env", "research_judge_env", "terminal_test_env")
_IN_NETNS = "HERMES_SCALE_BENCH_NETNS"


def _loopback_only() -> None:
    """Re-run this script in a new network namespace (loopback only, brought up here)."""
    if os.environ.get(_IN_NETNS) == "1":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ifr = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS: up
        return
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else [
        "unshare", "--user", "--map-root-user", "--net"]
    env = {**os.environ, _IN_NETNS: "1"}
    raise SystemExit(subprocess.call([*unshare, sys.executable, __file__, *sys.argv[1:]],
                                     env=env))


def record(project: Path, count: int) -> list[Path]:
    """``count`` small process recordings (in this process, against the scripted endpoint)."""
    from hermes_replay.cli import main as cli
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    made = []
    with ScriptedEndpoint(script="examples", seed=11, latency=(0.0, 0.0)) as endpoint:
        for k in range(count):
            stem = EXAMPLES[k % len(EXAMPLES)]
            cassette = project / "recorded" / f"{stem}-{k}" / "process.jsonl"
            code = cli(["record", f"environments/{stem}.py", "--cassette", str(cassette),
                        "--endpoint", endpoint.base_url, "--model", "scripted-example",
                        "--server-type", "openai", "--", "process", "--env.total_steps", "1",
                        "--env.group_size", "2", "--env.split_seed", str(k),
                        "--env.data_path_to_save_groups", str(project / f"g-{k}.jsonl")])
            if code != 0:
                raise SystemExit(f"recording {cassette} failed (exit {code})")
            made.append(cassette)
    for extra in project.glob("g-*.jsonl"):
        extra.unlink()
    return made


def corpus(project: Path, recorded: list[Path], count: int) -> Path:
    folder = project / "corpus"
    for k in range(count):
        target = folder / f"c{k:05d}" / "process.jsonl"
        target.parent.mkdir(parents=True)
        shutil.copy(recorded[k % len(recorded)], target)
    return folder


def timed(project: Path, args: list[str], out: Path, expected: int,
          against: Path | None = None) -> tuple[float, str]:
    """Wall seconds of one CLI run, and what it said about Ray (which cluster it ran on)."""
    t0 = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "hermes-replay"), "replay",
                           "corpus", "--no-report", "--out", str(out), *args],
                          cwd=project, capture_output=True, text=True, env=code_env(against))
    wall = time.perf_counter() - t0
    rows = [line for line in proc.stdout.splitlines()
            if line.startswith("corpus/") and line.rstrip().endswith(" ok")]
    if proc.returncode != 0 or len(rows) != expected:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}, {len(rows)}/{expected} "
                         f"ok\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    said = [line.removeprefix("hermes-replay replay: ") for line in proc.stderr.splitlines()
            if line.startswith("hermes-replay replay: ") and "Ray" in line]
    return wall, "; ".join(said)


def ray_task_overhead(calls: int) -> tuple[float, float]:
    """(seconds per task round trip through one driver, seconds to start a local cluster
    and two warm actors), measured with no-op tasks."""
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")

    @ray.remote(num_cpus=1)
    class Noop:
        def call(self, x: int) -> int:
            return x

    actors = [Noop.remote() for _ in range(2)]
    ray.get([a.call.remote(0) for a in actors])
    startup = time.perf_counter() - t0
    t1 = time.perf_counter()
    pending = {a.call.remote(0): a for a in actors}
    done = 0
    while done < calls:  # the executor's own pattern: one task per actor, refill on return
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            actor = pending.pop(ref)
            done += 1
            pending[actor.call.remote(done)] = actor
    ray.get(list(pending))
    per_task = (time.perf_counter() - t1) / calls
    ray.shutdown()
    return per_task, startup


def _own_ray_state() -> Path:
    """Ray's files for this run only (see the module's docstring); the folder, to remove."""
    for name in [k for k in os.environ if k.startswith("RAY_")]:
        del os.environ[name]
    state = Path(tempfile.mkdtemp(prefix="hr-ray-"))  # short: Ray's socket paths
    token = state / "auth_token"
    token.touch(mode=0o600)
    token.write_text(secrets.token_hex(32))
    os.environ.update({"RAY_TMPDIR": str(state), "RAY_AUTH_MODE": "token",
                       "RAY_AUTH_TOKEN_PATH": str(token)})
    return state


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cassettes", type=int, default=None, help="corpus size (1000)")
    p.add_argument("--reps", type=int, default=None, help="timed runs per side (1)")
    p.add_argument("--ray-address", default="local",
                   help="what the Ray side joins (local: a new local cluster per run)")
    p.add_argument("--quick", action="store_true", help="12 cassettes, 1 rep: proves it works")
    p.add_argument("--against", metavar="DIR",
                   help="also time this checkout of an earlier revision, run for run")
    args = p.parse_args(argv)
    against = check_against(args.against)
    trees: list[Path | None] = [None, against] if against else [None]
    count = args.cassettes or (12 if args.quick else 1000)
    reps = args.reps or 1
    _loopback_only()
    ray_state = _own_ray_state()
    os.chdir(ROOT)
    for name, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
                        "RAY_USAGE_STATS_ENABLED": "0",
                        "HERMES_API_KEY": "sk-bench-not-a-key"}.items():
        os.environ.setdefault(name, value)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"scale benchmark: {count} cassettes; -j 2 vs --executor ray (2 local workers); "
          f"nproc={os.cpu_count()}; load average {_load()}")
    with tempfile.TemporaryDirectory(prefix="hermes-scale-") as tmp:
        project = Path(tmp)
        (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        # the bench's own project: its cassettes may run its env files (docs/reliability.md)
        os.environ["HERMES_REPLAY_TRUST"] = str(project.resolve())
        (project / "environments").mkdir()
        for stem in EXAMPLES:
            shutil.copy(ROOT / "environments" / f"{stem}.py", project / "environments")
        t0 = time.perf_counter()
        recorded = record(project, 3)
        corpus(project, recorded, count)
        shutil.rmtree(project / "recorded")
        print(f"recorded 3 cassettes and laid out {count} in {time.perf_counter() - t0:.0f} s")
        os.chdir(project)
        sides = {"-j 2": ["-j", "2"],
                 "ray": ["--executor", "ray", "--ray-address", args.ray_address, "-j", "2"]}
        times: dict[str, list[float]] = {name: [] for name in sides}
        base: dict[str, list[float]] = {name: [] for name in sides}
        for rep in range(reps):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for name in order:
                for tree in trees if rep % 2 == 0 else list(reversed(trees)):
                    out = project / f"out-{rep}-{name[-1]}"
                    wall, said = timed(project, sides[name], out, count, tree)
                    (times if tree is None else base)[name].append(wall)
                    tag = "" if against is None else ("this " if tree is None else "DIR  ")
                    print(f"  rep {rep}: {tag}{name:5}: {wall:7.1f} s wall, {count / wall:6.2f} "
                          f"cassettes/s ({count} ok; load average {_load()})")
                    if said:
                        print(f"           {said}")
                    shutil.rmtree(out)
        if against is not None:
            for name in sides:
                mine, theirs = statistics.median(times[name]), statistics.median(base[name])
                print(f"{name}: this tree median {mine:.1f} s · {against} median "
                      f"{theirs:.1f} s · this/DIR {mine / theirs:.3f}")
        os.chdir(ROOT)
        per_task, startup = ray_task_overhead(200 if args.quick else 2000)
    shutil.rmtree(ray_state, ignore_errors=True)
    local, ray_wall = statistics.median(times["-j 2"]), statistics.median(times["ray"])
    ratio = ray_wall / local
    print(f"\n-j 2 median {local:.1f} s ({count / local:.2f} cassettes/s) · ray median "
          f"{ray_wall:.1f} s ({count / ray_wall:.2f} cassettes/s) · ray/-j 2 wall {ratio:.2f}")
    cost = 2 * local / count  # core-seconds per cassette, startup of the two workers included
    print(f"per-cassette cost (2 x -j 2 wall / cassettes): {cost * 1000:.0f} ms of one core; "
          f"Ray task round trip (no-op, one driver, 2 actors): {per_task * 1000:.2f} ms; "
          f"local cluster + 2 warm no-op actors: {startup:.1f} s")
    _projection(cost, per_task, startup)
    ok = ratio <= TARGET
    print(f"{'PASS' if ok else 'FAIL'}  ray wall <= {TARGET}x the wall of -j 2: {ratio:.2f}x "
          f"(load average now {_load()})")
    return 0 if ok or args.quick else 1


def _projection(cost: float, per_task: float, startup: float, cassettes: int = 100_000,
                nodes: int = 50) -> None:
    """Wall for ``cassettes`` on ``nodes`` nodes, from the costs measured here: the work
    spread over every core, or one driver handing out tasks — whichever is slower."""
    print(f"\nprojection: {cassettes:,} cassettes on {nodes} nodes (one driver)")
    for cores in (2, 32):
        workers = nodes * cores
        compute = cassettes * cost / workers
        dispatch = cassettes * per_task
        wall = startup + max(compute, dispatch)
        bound = "the workers" if compute >= dispatch else "the driver's dispatch"
        print(f"  {cores:2} cores/node ({workers:,} actors): work {compute:7.0f} s, driver "
              f"dispatch {dispatch:5.0f} s -> about {wall / 60:5.1f} min, bound by {bound}")
    print("  (assumes this machine's per-core speed, cassettes like these, a shared filesystem "
          "that keeps up, and actors already warm on every node; a driver-bound run is "
          "faster as several shard jobs, each its own driver: --shard I/N)")


if __name__ == "__main__":
    raise SystemExit(main())
