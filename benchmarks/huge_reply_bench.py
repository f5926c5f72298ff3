"""What a huge model reply costs to replay: time and peak memory against its size.

    .venv/bin/python benchmarks/huge_reply_bench.py [--sizes 0,1,5,10,50] [--unbounded 5]

Takes the shipped ``multi_signal_env`` ``process`` cassette and, per size, a copy whose last
recorded reply of one rollout is N MB of text (the rollout's final answer, so no later request
repeats it). Each copy is replayed end to end — the real environment, atroposlib's
``ServerManager``, the openai SDK, the reward, tokens and masks, ``groups.jsonl`` and its HTML,
the wandb rollout table — each in a fresh process, whose CPU seconds (not wall time: the
machine is shared) and peak RSS (``ru_maxrss``) are reported, with the cost per MB above the
unmodified cassette and how that cost grows from 5 MB to the largest size (linear: 1.0).

``--unbounded`` sizes are replayed a second time, side by side, with the three workarounds
off — the cap on the wandb rollout table, tokenizing long texts in verified pieces
(``environments/_chunked.py``) and the slim ``groups.html`` (``environments/_groups_html.py``)
— i.e. atroposlib's and transformers' own behaviour. An adversarial probe found a 50 MB reply
past 120 s at 9.9 GB that way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "cassettes" / "multi_signal_env" / "process.jsonl"
SENTENCE = "The answer follows from the numbers above, step by careful step. "

CHILD = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
os.chdir({root!r})
if os.environ.get("HUGE_UNBOUNDED"):
    import contextlib
    import environments._chunked
    import environments.hermes_base_env as base_env
    base_env.HermesAgentBaseEnv.wandb_rollout_max_tokens = 0  # every token decoded
    environments._chunked.CHUNK = 1 << 62  # one encode call per text
    base_env.bounded_groups_html = contextlib.nullcontext  # atroposlib's generate_html
import hermes_replay
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
start, cpu0 = time.perf_counter(), cpu()
result = hermes_replay.run_cassette(sys.argv[1], out_dir=sys.argv[2])
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "cpu": cpu_s, "rss_mb": rss,
                  "rollouts": len(result.rollouts)}}))
"""


def with_huge_reply(source: Path, out: Path, megabytes: float) -> str:
    """Write ``source`` with the last reply of its first rollout made ``megabytes`` MB long."""
    from hermes_replay._cassette import load_cassette, write_cassette

    cassette = load_cassette(source)
    interactions = list(cassette.interactions)
    rollout = next(i.rollout for i in interactions if i.rollout)
    last = max((i for i in interactions if i.rollout == rollout), key=lambda i: i.seq)
    if megabytes:
        body = json.loads(json.dumps(last.response["body"]))
        text = SENTENCE * int(megabytes * 1_000_000 / len(SENTENCE))
        body["choices"][0]["message"]["content"] = text
        response = {k: v for k, v in last.response.items() if k != "json_style"}
        new = last.model_copy(update={"response": {**response, "body": body}})
        interactions[interactions.index(last)] = new
    outcomes = {rid: rec.outcome for rid, rec in cassette.rollouts.items() if rec.outcome}
    write_cassette(out, cassette.header, interactions, outcomes, cassette.tool_calls)
    return rollout


def measure(cassette: Path, out_dir: Path, unbounded: bool) -> dict[str, float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    if unbounded:
        env["HUGE_UNBOUNDED"] = "1"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), str(cassette),
                           str(out_dir)], capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"replay of {cassette.name} failed:\n{done.stderr[-3000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    data["wall"] = wall
    return data


def _per_mb(data: dict[str, float], base: dict[str, float], size: float) -> tuple[float, float]:
    return (data["cpu"] - base["cpu"]) / size, (data["rss_mb"] - base["rss_mb"]) / size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1,5,10,50",
                        help="reply sizes in MB (0, the unmodified cassette, is the base)")
    parser.add_argument("--unbounded", default="5",
                        help="sizes also replayed with the workarounds off ('' for none)")
    args = parser.parse_args(argv)
    sizes = sorted({float(s) for s in args.sizes.split(",") if s} | {0.0})
    unbounded = [float(s) for s in args.unbounded.split(",") if s]
    rows = []
    with tempfile.TemporaryDirectory(prefix=".huge-bench-", dir=ROOT) as tmp:
        work = Path(tmp)
        for size in sorted(set(sizes) | set(unbounded)):
            cassette = work / f"huge-{size:g}mb.jsonl"
            rollout = with_huge_reply(CASSETTE, cassette, size)
            kinds = ([False] if size in sizes else []) + ([True] if size in unbounded else [])
            for kind in kinds:
                data = measure(cassette, work / f"out-{size:g}-{int(kind)}", kind)
                rows.append((size, kind, data))
                print(f"{size:5g} MB reply  {'unbounded' if kind else 'bounded  '}  "
                      f"{data['cpu']:7.2f} s CPU ({data['seconds']:6.2f} s wall)  "
                      f"peak RSS {data['rss_mb']:7.0f} MB  rollouts {data['rollouts']}",
                      flush=True)
            cassette.unlink()
    base = next(d for s, k, d in rows if s == 0 and not k)
    print(f"\ncassette: {CASSETTE.relative_to(ROOT)}; the huge reply ends rollout {rollout}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} cores")
    print("per MB of reply above the unmodified cassette (linear: the same at every size):")
    per_mb = {}
    for size, kind, data in rows:
        if size:
            cpu, rss = per_mb[size, kind] = _per_mb(data, base, size)
            print(f"  {size:5g} MB {'unbounded' if kind else 'bounded  '}: {cpu:6.3f} s CPU/MB, "
                  f"{rss:6.1f} MB RSS/MB")
    bounded = sorted(s for s, k in per_mb if not k)
    ref = next((s for s in bounded if s >= 5), None)
    if ref is not None and bounded[-1] > ref:
        (cpu_ref, rss_ref), (cpu_top, rss_top) = per_mb[ref, False], per_mb[bounded[-1], False]
        print(f"linearity, per-MB cost at {bounded[-1]:g} MB / at {ref:g} MB (target <= 1.5): "
              f"{cpu_top / cpu_ref:.2f}x CPU, {rss_top / rss_ref:.2f}x RSS")
    for size in unbounded:
        ours = next((d for s, k, d in rows if s == size and not k), None)
        raw = next((d for s, k, d in rows if s == size and k), None)
        if ours and raw:
            print(f"  {size:5g} MB, workarounds off / on: {raw['cpu'] / ours['cpu']:.2f}x CPU, "
                  f"{raw['rss_mb'] / ours['rss_mb']:.2f}x peak RSS")
    print(f"(this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
