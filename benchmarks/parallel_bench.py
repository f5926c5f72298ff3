"""Parallel replay: ``hermes-replay replay DIR -j 2`` against ``-j 1``, side by side in one run.

    .venv/bin/python benchmarks/parallel_bench.py [--generated 20] [--reps 2] [--shipped N]
                                                   [--quick] [--against DIR]

The folder holds the shipped cassettes (``cassettes/``) and ``--generated`` more, recorded here
first against the scripted endpoint (``process`` runs of the three example environments with
different split seeds, so every one replays different items). Each timed run is the real CLI in
a fresh process, as a user or CI runs it — imports, every cassette's recorded command, outputs,
the final table — and must exit 0 with every cassette ``ok``. Runs alternate (ABAB…) so load
from other processes falls on both; the ratio of medians is the result (target ≥ 1.6× on the
2-core machine the project is built on). ``--against DIR`` times a checkout of an earlier
revision beside this tree, every run of one beside the same run of the other, and prints
this/DIR per ``-j`` value (see ``_against``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._against import check_against, code_env

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.6
EXAMPLES = ("multi_signal_env", "research_judge_env", "terminal_test_env")


def generate(folder: Path, count: int) -> list[Path]:
    """Record ``count`` small ``process`` cassettes into ``folder`` (in this process)."""
    from hermes_replay.cli import main as cli
    from hermes_replay.scripted_endpoint import ScriptedEndpoint

    out: list[Path] = []
    with ScriptedEndpoint(script="examples", seed=11, latency=(0.0, 0.01)) as endpoint:
        for k in range(count):
            stem = EXAMPLES[k % len(EXAMPLES)]
            cassette = folder / f"{stem}-{k:02d}" / "process.jsonl"
            code = cli(["record", f"environments/{stem}.py", "--cassette", str(cassette),
                        "--endpoint", endpoint.base_url, "--model", "scripted-example",
                        "--server-type", "openai", "--", "process", "--env.total_steps", "2",
                        "--env.group_size", "4", "--env.split_seed", str(k),
                        "--env.data_path_to_save_groups", str(folder / f"groups-{k}.jsonl")])
            if code != 0:
                raise SystemExit(f"recording {cassette} failed (exit {code})")
            out.append(cassette)
    for extra in folder.glob("groups-*.jsonl"):  # the env's own output, not a cassette
        extra.unlink()
    return out


def timed_replay(folder: Path, jobs: int, out: Path, expected: int,
                 against: Path | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "hermes-replay"), "replay",
                           str(folder), "-j", str(jobs), "--strict", "--out", str(out)],
                          # from the project, not the repository: a worker's '' on sys.path
                          # must not be this tree when the run is DIR's
                          cwd=folder.parent, capture_output=True, text=True,
                          env=code_env(against))
    wall = time.perf_counter() - t0
    rows = [line for line in proc.stdout.splitlines() if line.rstrip().endswith(" ok")]
    if proc.returncode != 0 or len(rows) != expected:
        raise SystemExit(f"-j {jobs}: exit {proc.returncode}, {len(rows)}/{expected} ok\n"
                         f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--generated", type=int, default=None, help="cassettes recorded here (20)")
    p.add_argument("--reps", type=int, default=None, help="timed runs per -j value (2)")
    p.add_argument("--shipped", type=int, default=None,
                   help="replay only the first N shipped cassettes (all)")
    p.add_argument("--quick", action="store_true", help="2 generated, 1 rep: proves it works")
    p.add_argument("--against", metavar="DIR",
                   help="also time this checkout of an earlier revision, run for run")
    args = p.parse_args(argv)
    against = check_against(args.against)
    trees: list[Path | None] = [None, against] if against else [None]
    generated = args.generated if args.generated is not None else (2 if args.quick else 20)
    reps = args.reps or (1 if args.quick else 2)
    os.chdir(ROOT)
    for name, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
                        "HERMES_API_KEY": "sk-bench-not-a-key"}.items():
        os.environ.setdefault(name, value)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    shipped = sorted((ROOT / "cassettes").glob("*/*.jsonl"))[:args.shipped]
    print(f"parallel replay benchmark: {len(shipped)} shipped + {generated} generated "
          f"cassettes; nproc={os.cpu_count()}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="hermes-parallel-") as tmp:
        folder = Path(tmp) / "cassettes"
        # a project of its own (replay runs env files only from the cassette's project)
        (Path(tmp) / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        # the bench's own project: its cassettes may run its env files (docs/reliability.md)
        os.environ["HERMES_REPLAY_TRUST"] = str(Path(tmp).resolve())
        (Path(tmp) / "environments").mkdir()
        for stem in EXAMPLES:
            shutil.copy(ROOT / "environments" / f"{stem}.py", Path(tmp) / "environments")
        for cassette in shipped:
            target = folder / "shipped" / cassette.parent.name / cassette.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(cassette, target)
        t0 = time.perf_counter()
        generate(folder / "generated", generated)
        total = len(shipped) + generated
        print(f"recorded {generated} cassettes in {time.perf_counter() - t0:.0f} s")
        times: dict[tuple[Path | None, int], list[float]] = {}
        for rep in range(reps):
            for jobs in (1, 2) if rep % 2 == 0 else (2, 1):
                for tree in trees if rep % 2 == 0 else list(reversed(trees)):
                    side = "this" if tree is None else "DIR "
                    out = Path(tmp) / f"out-{jobs}-{rep}-{side.strip()}"
                    wall = timed_replay(folder, jobs, out, total, tree)
                    times.setdefault((tree, jobs), []).append(wall)
                    print(f"  rep {rep}: {side if against else ''}-j {jobs}: {wall:6.1f} s wall "
                          f"({total} cassettes ok)")
    if against:
        for jobs in (1, 2):
            mine, base = (statistics.median(times[(t, jobs)]) for t in (None, against))
            print(f"-j {jobs}: this tree median {mine:.1f} s · {against} median {base:.1f} s · "
                  f"this/DIR {mine / base:.3f}")
    one, two = statistics.median(times[(None, 1)]), statistics.median(times[(None, 2)])
    ratio = one / two
    print(f"\n-j 1 median {one:.1f} s · -j 2 median {two:.1f} s · {ratio:.2f}x faster")
    ok = ratio >= TARGET
    print(f"{'PASS' if ok else 'FAIL'}  -j 2 >= {TARGET}x faster than -j 1: {ratio:.2f}x "
          f"(load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
