"""What one replay miss costs: a replay with one miss against the same replay without it.

    .venv/bin/python benchmarks/miss_bench.py [--repeat 5] [--cassette PATH]

Takes a shipped ``process`` cassette and a copy of it with the last turn of one rollout left
out (the code now makes one request more than was recorded: exactly one miss), and replays
both through ``hermes_replay.run_cassette`` — the real environment, atroposlib's
``ServerManager`` with its tenacity retries, the openai SDK — alternating clean and miss runs
in one process so load from other processes hits both alike. Prints the medians, their ratio
and their difference; the target is a difference under 1 s (before misses ended their
request at once, atroposlib's retry backoff made one miss cost about 16 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASSETTE = ROOT / "cassettes" / "multi_signal_env" / "process.jsonl"
TARGET_EXTRA_S = 1.0


def one_turn_less(cassette: Path, out: Path) -> str:
    """Write ``cassette`` without the last turn of its first multi-turn rollout; its id."""
    lines = cassette.read_text(encoding="utf-8").splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    turns: dict[str, list[int]] = {}
    for i, rec in enumerate(records):
        if rec.get("type") == "interaction" and rec.get("rollout"):
            turns.setdefault(rec["rollout"], []).append(i)
    rollout, indexes = next((r, ix) for r, ix in turns.items() if len(ix) > 1)
    drop = max(indexes, key=lambda i: records[i]["seq"])
    out.write_text("".join(line for i, line in enumerate(lines) if i != drop), encoding="utf-8")
    return rollout


def replay(cassette: Path, out_dir: Path) -> tuple[float, int]:
    """Seconds for one replay, and how many misses it reported."""
    import hermes_replay

    start = time.perf_counter()
    try:
        hermes_replay.run_cassette(cassette, out_dir=out_dir)
        misses = 0
    except hermes_replay.CassetteMiss as exc:
        misses = len(exc.misses)
    return time.perf_counter() - start, misses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each kind (default 5)")
    parser.add_argument("--cassette", type=Path, default=DEFAULT_CASSETTE)
    args = parser.parse_args(argv)
    for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                        "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(name, value)
    os.chdir(ROOT)  # the cassette header names its env file relative to the repository
    # inside the repository: replay runs only env files of the project the cassette is in
    with tempfile.TemporaryDirectory(prefix=".miss-bench-", dir=ROOT) as tmp:
        work = Path(tmp)
        clean = work / "clean.jsonl"
        clean.write_bytes(args.cassette.read_bytes())
        missing = work / "one-miss.jsonl"
        rollout = one_turn_less(args.cassette, missing)
        replay(clean, work / "warm-up")  # imports and first-run caches out of the timings
        times: dict[str, list[float]] = {"clean": [], "miss": []}
        for n in range(args.repeat):
            for kind, path in (("clean", clean), ("miss", missing))[:: 1 if n % 2 else -1]:
                seconds, misses = replay(path, work / f"{kind}-{n}")
                expected = 0 if kind == "clean" else 1
                if misses != expected:
                    print(f"{kind} replay reported {misses} misses, expected {expected}")
                    return 1
                times[kind].append(seconds)
    clean_s, miss_s = statistics.median(times["clean"]), statistics.median(times["miss"])
    print(f"cassette: {args.cassette.relative_to(ROOT)} (one miss: last turn of {rollout} "
          "left out)")
    print(f"runs: {args.repeat} of each, alternating; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"clean replay     median {clean_s:6.2f} s  (runs: "
          f"{', '.join(f'{t:.2f}' for t in times['clean'])})")
    print(f"one-miss replay  median {miss_s:6.2f} s  (runs: "
          f"{', '.join(f'{t:.2f}' for t in times['miss'])})")
    extra = miss_s - clean_s
    print(f"ratio miss/clean {miss_s / clean_s:.2f}x; the miss adds {extra:+.2f} s")
    verdict = "PASS" if extra < TARGET_EXTRA_S else "FAIL"
    print(f"{verdict}  a replay with one miss fails within {TARGET_EXTRA_S:.0f} s of the clean "
          "replay")
    return 0


if __name__ == "__main__":
    sys.exit(main())
