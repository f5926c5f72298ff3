"""Bytes on disk and load time of a large cassette: plain, compacted, zstd, and vcrpy's YAML.

    .venv/bin/python benchmarks/storage_bench.py [--interactions 10000] [--quick]

The traffic is ``replay_bench``'s (10-turn tool-calling rollouts in GRPO groups of 8, six tool
schemas, seeded). The hermes cassette is written by the core's ``write_cassette`` from the
requests the openai SDK really sends (``_hermes.write``); the YAML is what vcrpy records for the
same requests (``_vcr.write_yaml``). Both are built from a captured sample of real SDK requests:
the SDK's bytes for the rest are the same serialisation, which is checked on every captured
request first (capturing 10,000 requests through the SDK would take minutes and measure
nothing). Then each form is written, its bytes counted and its load timed (median of
``--reps``, CPU and wall) in one run, and the target is judged: compressed ≤ 5% of the YAML.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2

import hermes_replay
from benchmarks import _drivers, _hermes, _synthetic, _vcr
from hermes_replay._cassette import write_cassette
from hermes_replay._cassette.compact import compact_cassette

TARGET = 0.05  # compressed cassette bytes / vcrpy YAML bytes
SAMPLE_GROUPS = 2  # groups of rollouts whose requests are captured from the real SDK


def sdk_requests(rollouts: list[_synthetic.Rollout]) -> dict[tuple[str, int], httpx2.Request]:
    """The SDK's request for every turn: captured for a sample, built alike for the rest after
    checking that building reproduces every captured request byte for byte."""
    sample = rollouts[: 8 * SAMPLE_GROUPS]
    captured = _drivers.capture_requests(sample)
    first = next(iter(captured.values()))
    order = list(json.loads(first.content))
    headers = [(k, v) for k, v in first.headers.multi_items() if k != "content-length"]

    def build(body: dict) -> httpx2.Request:
        content = json.dumps({k: body[k] for k in order if k in body} | body,
                             separators=(",", ":")).encode()
        return httpx2.Request("POST", first.url,
                              headers=[*headers, ("content-length", str(len(content)))],
                              content=content)

    for (rid, seq), real in captured.items():
        ro = next(r for r in sample if r.id == rid)
        mine = build(ro.requests[seq])
        if mine.content != real.content or list(mine.headers.multi_items()) != \
                list(real.headers.multi_items()):
            raise AssertionError(f"{rid} turn {seq}: built request differs from the SDK's")
    return {(ro.id, seq): captured.get((ro.id, seq)) or build(body)
            for ro in rollouts for seq, body in enumerate(ro.requests)}


def timed_load(load: object, reps: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        load()  # type: ignore[operator]
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--interactions", type=int, default=None, help="cassette size (10000)")
    p.add_argument("--reps", type=int, default=None, help="loads timed per form (3)")
    p.add_argument("--yaml-load", action=argparse.BooleanOptionalAction, default=True,
                   help="also time vcrpy loading its YAML (slow at 10,000: minutes)")
    p.add_argument("--quick", action="store_true", help="tiny size: proves the script works")
    args = p.parse_args(argv)
    n = args.interactions or (160 if args.quick else 10_000)
    reps = args.reps or (1 if args.quick else 3)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"storage benchmark: {n} interactions, 10-turn rollouts, groups of 8"
          + (" (--quick: too small to judge)" if args.quick else ""))
    rollouts = _synthetic.build_traffic(n)
    requests = sdk_requests(rollouts)
    with tempfile.TemporaryDirectory(prefix="hermes-storage-") as tmp:
        d = Path(tmp)
        forms = {"plain .jsonl": d / "c.jsonl", "zstd .jsonl.zst": d / "z.jsonl.zst",
                 "compact .jsonl": d / "k.jsonl", "compact + zstd": d / "kz.jsonl.zst"}
        t0 = time.perf_counter()
        _hermes.write(forms["plain .jsonl"], rollouts, requests)
        write_s = {"plain .jsonl": time.perf_counter() - t0}
        for name, source in (("zstd .jsonl.zst", None), ("compact .jsonl", "compact"),
                             ("compact + zstd", "compact")):
            t0 = time.perf_counter()
            if source:
                compact_cassette(forms["plain .jsonl"], forms[name])
            else:
                c = hermes_replay.load_cassette(forms["plain .jsonl"])
                write_cassette(forms[name], c.header, c.interactions, c.outcomes,
                               c.tool_calls)
            write_s[name] = time.perf_counter() - t0
        yaml_path = d / "vcr.yaml"
        yaml_bytes = _vcr.write_yaml(yaml_path, rollouts, requests)
        print(f"\n{'form':<18} {'bytes':>14} {'% of YAML':>10} {'write s':>8} "
              f"{'load cpu s':>11} {'load wall s':>12}")
        expected = hermes_replay.load_cassette(forms["plain .jsonl"])
        sizes: dict[str, int] = {}
        for name, path in forms.items():
            loaded = hermes_replay.load_cassette(path)
            assert loaded.interactions == expected.interactions, name  # same cassette
            wall, cpu = timed_load(lambda path=path: hermes_replay.load_cassette(path), reps)
            sizes[name] = path.stat().st_size
            print(f"{name:<18} {sizes[name]:>14,} {sizes[name] / yaml_bytes:>10.2%} "
                  f"{write_s[name]:>8.2f} {cpu:>11.3f} {wall:>12.3f}")
        yaml_cell = "(skipped)"
        if args.yaml_load:
            from vcr.persisters.filesystem import FilesystemPersister
            from vcr.serializers import yamlserializer

            wall, cpu = timed_load(lambda: FilesystemPersister.load_cassette(
                str(yaml_path), yamlserializer), 1)
            yaml_cell = f"{cpu:>11.3f} {wall:>12.3f}"
        print(f"{'vcrpy YAML':<18} {yaml_bytes:>14,} {1:>10.2%} {'':>8} {yaml_cell}")
        ratio = sizes["zstd .jsonl.zst"] / yaml_bytes
        both = sizes["compact + zstd"] / yaml_bytes
        ok = ratio <= TARGET
        plain = sizes["plain .jsonl"] / yaml_bytes
        print(f"\n{'PASS' if ok else 'FAIL'}  zstd cassette <= {TARGET:.0%} of vcrpy YAML: "
              f"{ratio:.2%} (compact + zstd {both:.2%}); plain {plain:.1%}")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
