"""Replay performance, side by side in one run: the SDK floor, hermes_replay, vcrpy.

    .venv/bin/python benchmarks/replay_bench.py [--sizes 1000,10000] [--quick]

Builds synthetic GRPO-style traffic (system prompt, six tool schemas, 10-turn tool-calling
rollouts in groups of 8), writes it as a real hermes_replay cassette and as vcrpy's YAML, and
measures per-request time against the floor (the openai SDK over an in-memory transport),
recording overhead against pass-through to the scripted endpoint, load time, peak memory and
bytes on disk; then prints PASS/FAIL per target. Machines are shared and noisy: every number
is a median over interleaved repetitions, and targets are judged on CPU time (process time,
which other processes' load barely moves) with wall time printed beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from importlib import metadata
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hermes_replay
from benchmarks import _drivers, _hermes, _instructions, _record, _synthetic, _vcr

# issue 27's targets: replay within 5% of the SDK alone, a 10,000-interaction start in 0.3 s
# of CPU, recording within 5% wall and 1.5 ms of client CPU per request of pass-through
TARGETS = {"replay_ratio": 1.05, "flat_ratio": 1.20, "record_ratio": 1.05, "load_s": 0.3,
           "record_cpu_ms": 1.5, "bytes_ratio": 0.40}
Timing = tuple[float, float]  # (wall seconds, CPU seconds)


def _med(samples: list[Timing]) -> Timing:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def _ms(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e3:8.3f}"


def machine() -> list[str]:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in
                         ("hermes-replay", "openai", "httpx2", "vcrpy", "pydantic", "PyYAML"))
    return [f"machine: nproc={os.cpu_count()} (usable {len(os.sched_getaffinity(0))}), "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
            f"{platform.machine()} {platform.system()} {platform.release()}",
            f"python {platform.python_version()} ({sys.executable}); git {commit or '?'}",
            f"packages: {versions}"]


def fit_exponent(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(total time) against log(n): total time ∝ n**slope."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            / sum((x - mx) ** 2 for x in xs))


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.results: dict[str, object] = {}
        self.instr_note = ""
        self.verdicts: list[tuple[str, bool, str]] = []
        biggest = max([*args.sizes, *args.vcr_sizes, args.record_requests])
        self.traffic = _synthetic.build_traffic(biggest, turns=args.turns)
        # the SDK's real requests for the first group: the hermes cassette's stored form is
        # checked against them, and the vcrpy YAML is made of them
        self.captured = _drivers.capture_requests(self._take(max(args.vcr_sizes)))
        self.warm = tmp / "warm-up.jsonl"  # one group, to warm both paths before timing
        _hermes.write(self.warm, self._take(8 * args.turns), self.captured)

    def _take(self, n: int) -> list[_synthetic.Rollout]:
        return self.traffic[: max(1, n // self.args.turns)]

    def verdict(self, name: str, ok: bool, detail: str) -> None:
        self.verdicts.append((name, ok, detail))

    # ------------------------------------------------------------------ replay vs floor

    def replay_vs_floor(self) -> None:
        """Per request, floor and replay side by side, and whether it stays flat with size.

        Two corrections keep the comparison fair, both printed beside the raw figures:
        garbage collection paid inside the floor's slices is charged to the replay (the
        collector walks the recordings the replay decodes and keeps; the SDK alone leaves
        almost nothing behind), and flatness is judged on the ratio to the floor measured in
        the same minutes (the two sizes run minutes apart, and the shared machine's speed
        drifts: the floor alone moved 1.15x between them on 2026-12-02). A small size gets
        as many runs as it takes to replay as many requests as the largest, so its
        median is no noisier than the largest size's."""
        print("\n== replay: per request (ms); floor and replay driven group by group, ABBA, "
              "in one event loop; median over runs")
        print("   GC: collector CPU per request paid in each mode's slices (full collections); "
              "'charged' moves the floor's share to the replay")
        print(f"{'interactions':>12} {'runs':>4} {'floor cpu':>9} {'replay cpu':>10} "
              f"{'ratio':>6} {'range':>13} | {'gc floor':>8} {'gc replay':>9} {'full':>5} "
              f"{'charged':>7} {'overhead':>8} | {'floor wall':>10} {'replay wall':>11} "
              f"{'ratio':>6} | {'start s':>7}")
        per: dict[int, dict[str, float]] = {}
        _hermes.replay_paired(self.warm, self._take(8 * self.args.turns))  # warm-up
        biggest = max(self.args.sizes)
        for size in self.args.sizes:
            rollouts = self._take(size)
            n = _synthetic.count(rollouts)
            path = self.tmp / f"hermes-{n}.jsonl"
            _hermes.write(path, rollouts, self.captured)
            # --quick judges nothing: one run per size there, as asked
            reps = self.args.reps if self.args.quick else max(self.args.reps,
                                                              math.ceil(biggest / n))
            runs = [_hermes.replay_paired(path, rollouts) for _ in range(reps)]
            cpu_ratios = [t["replay"][1] / t["floor"][1] for _, t in runs]
            wall_ratios = [t["replay"][0] / t["floor"][0] for _, t in runs]
            # the floor's GC moved to the replay: floor - its GC, replay + the floor's GC
            charged = [(t["replay"][1] + t["floor"][3]) / (t["floor"][1] - t["floor"][3])
                       for _, t in runs]
            overhead = [(t["replay"][1] + 2 * t["floor"][3] - t["floor"][1]) / n * 1e3
                        for _, t in runs]
            (fw, fc), (rw, rc) = (_med([t[mode][:2] for _, t in runs]) for mode in ("floor",
                                                                                    "replay"))
            gf, gr = (statistics.median(t[mode][3] for _, t in runs) / n * 1e3
                      for mode in ("floor", "replay"))
            full = statistics.median(t["floor"][4] + t["replay"][4] for _, t in runs)
            ratio = statistics.median(cpu_ratios)
            per[n] = {"replay_ms": rc / n * 1e3, "floor_ms": fc / n * 1e3, "ratio": ratio,
                      "charged": statistics.median(charged),
                      "overhead_ms": statistics.median(overhead), "gc_floor_ms": gf,
                      "gc_replay_ms": gr, "full": full}
            self.results[f"replay_{n}"] = {"floor_cpu_ms": fc / n * 1e3, "replay_cpu_ms":
                                           rc / n * 1e3, "floor_wall_ms": fw / n * 1e3,
                                           "replay_wall_ms": rw / n * 1e3, "ratio": ratio,
                                           **per[n]}
            spread = f"{min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}"
            print(f"{n:>12} {reps:>4} {_ms(fc, n):>9} {_ms(rc, n):>10} {ratio:6.3f} "
                  f"{spread:>13} | {gf:8.3f} {gr:9.3f} {full:5.0f} {per[n]['charged']:7.3f} "
                  f"{per[n]['overhead_ms']:8.3f} | {_ms(fw, n):>10} {_ms(rw, n):>11} "
                  f"{statistics.median(wall_ratios):6.3f} | "
                  f"{statistics.median(s for s, _ in runs):7.3f}")
        sizes = sorted(per)
        big, small = sizes[-1], sizes[0]
        charged_big = per[big]["charged"]
        self.verdict(f"replay <= {TARGETS['replay_ratio']:.2f}x floor at {big}", charged_big <=
                     TARGETS["replay_ratio"],
                     f"{charged_big:.3f}x with the floor's GC charged to the replay "
                     f"(raw {per[big]['ratio']:.3f}x; CPU, paired){self.instr_note}")
        if big != small:
            raw = per[big]["replay_ms"] / per[small]["replay_ms"]
            floor_flat = per[big]["floor_ms"] / per[small]["floor_ms"]
            flat = per[big]["charged"] / per[small]["charged"]
            self.verdict(f"replay per request flat {small} -> {big}", flat <=
                         TARGETS["flat_ratio"],
                         f"{flat:.3f}x against the floor measured beside it, GC charged "
                         f"(raw replay ms {raw:.3f}x while the floor itself moved "
                         f"{floor_flat:.3f}x)")
            o_small, o_big = per[small]["overhead_ms"], per[big]["overhead_ms"]
            # our own cost, in floor-relative terms so the machine's drift cancels
            growth = (o_big / per[big]["floor_ms"]) / (o_small / per[small]["floor_ms"])
            self.verdict(f"our overhead per request (replay - floor) flat {small} -> {big}",
                         growth <= TARGETS["flat_ratio"],
                         f"{o_small:.3f} -> {o_big:.3f} ms/request, GC charged "
                         f"({growth:.3f}x relative to the floor; GC per replayed request "
                         f"{per[small]['gc_floor_ms'] + per[small]['gc_replay_ms']:.3f} -> "
                         f"{per[big]['gc_floor_ms'] + per[big]['gc_replay_ms']:.3f} ms, "
                         f"full collections {per[small]['full']:.0f} -> "
                         f"{per[big]['full']:.0f} per run)")
        self.floor_ms = {n: v["floor_ms"] for n, v in per.items()}

    def instructions(self) -> None:
        """The replay/floor ratio in executed instructions: the same comparison in a unit the
        machine's load does not move (callgrind; the marginal cost per request between two
        sizes, so one-off work per run — the default client's TLS set-up — drops out)."""
        self.instr_note = ""
        if not self.args.instructions:
            return
        if not _instructions.available():
            print("\n== instructions: valgrind not found, skipped")
            return
        small, big = self.args.instr_sizes
        print(f"\n== instructions per request under callgrind (marginal, {small} -> {big} "
              "requests; deterministic, slow: a few minutes)")
        path = self.tmp / f"instr-{big}.jsonl"
        rollouts = self._take(big)
        _hermes.write(path, rollouts, self.captured)
        jobs = {(mode, n): (mode, n, path, self.args.turns)
                for mode in ("floor", "replay") for n in (small, big)}
        counts = _instructions.count_all(jobs)
        per = {mode: (counts[(mode, big)] - counts[(mode, small)]) / (big - small)
               for mode in ("floor", "replay")}
        ratio = per["replay"] / per["floor"]
        print(f"floor {per['floor'] / 1e6:8.2f} M   replay {per['replay'] / 1e6:8.2f} M   "
              f"ratio {ratio:.3f}   (+{(per['replay'] - per['floor']) / 1e6:.2f} M "
              "instructions per request)")
        self.results["instructions"] = {"floor": per["floor"], "replay": per["replay"]}
        self.instr_note = f"; instructions {ratio:.3f}x"

    # ------------------------------------------------------------------ vcrpy

    def vcrpy(self) -> None:
        print("\n== vcrpy 9 replay (body matching), same traffic, same SDK")
        print(f"{'interactions':>12} {'vcrpy cpu ms/req':>16} {'floor cpu ms/req':>16} "
              f"{'ratio':>8} {'yaml bytes':>11} {'hermes bytes':>12} {'bytes ratio':>11}")
        points: list[tuple[int, float]] = []
        for size in self.args.vcr_sizes:
            rollouts = self._take(size)
            n = _synthetic.count(rollouts)
            yaml_path, ours = self.tmp / f"vcr-{n}.yaml", self.tmp / f"ours-{n}.jsonl"
            captured = {k: v for k, v in self.captured.items()
                        if k[0] in {ro.id for ro in rollouts}}
            yaml_bytes = _vcr.write_yaml(yaml_path, rollouts, captured)
            our_bytes = _hermes.write(ours, rollouts, captured)
            floor = _drivers.run(rollouts, _drivers.DictTransport(
                _drivers.response_bytes(rollouts)))
            _, _, cpu = _vcr.replay(yaml_path, rollouts)
            points.append((n, cpu))
            print(f"{n:>12} {_ms(cpu, n):>16} {_ms(floor[1], n):>16} {cpu / floor[1]:8.1f} "
                  f"{yaml_bytes:>11,} {our_bytes:>12,} {our_bytes / yaml_bytes:11.3f}")
            self.bytes_ratio = (n, our_bytes, yaml_bytes)
        if len(points) >= 2:
            k = fit_exponent(points)
            n0, t0 = points[-1]
            print(f"vcrpy total replay time grows as n^{k:.2f} (per request as n^{k - 1:.2f}; "
                  "log-log least squares over the sizes above)")
            for n in self.args.sizes:
                per = t0 / n0 * (n / n0) ** (k - 1)
                floor = self.floor_ms.get(n)
                extra = f" = {per * 1e3 / floor:,.0f}x the floor" if floor else ""
                print(f"  extrapolated vcrpy at {n:>6}: {per * 1e3:,.0f} ms/request{extra}")
            self.results["vcrpy_exponent"] = k
        n, ours, theirs = self.bytes_ratio
        self.verdict(f"cassette bytes <= {TARGETS['bytes_ratio']:.0%} of vcrpy YAML "
                     f"({self.args.turns}-turn rollouts)", ours / theirs <= TARGETS["bytes_ratio"],
                     f"{ours / theirs:.1%} ({ours:,} vs {theirs:,} bytes, {n} interactions)")

    # ------------------------------------------------------------------ load and memory

    def load_and_memory(self) -> None:
        n = max(self.args.sizes)
        path = self.tmp / f"hermes-{n}.jsonl"
        size = path.stat().st_size
        print(f"\n== load: {n} interactions, {size:,} bytes ({size / n:,.0f} bytes/interaction)")
        loads: list[Timing] = []
        starts: list[Timing] = []
        stops: list[Timing] = []
        for _ in range(self.args.reps):
            loads.append(_timed(lambda: hermes_replay.load_cassette(path)))
            session = hermes_replay.cassette(path, mode="replay", strict=False)
            starts.append(_timed(session.start))
            stops.append(_timed(session.stop))  # nothing replayed: checks every line
            del session
        (lw, lc), (sw, sc), (tw, tc) = _med(loads), _med(starts), _med(stops)
        print(f"load_cassette() (reads every line up front): cpu {lc:6.3f} s   wall {lw:6.3f} s")
        print(f"replay session start (index; bodies on first use): cpu {sc:6.3f} s   "
              f"wall {sw:6.3f} s")
        print(f"its stop with nothing replayed (decodes and checks every line): cpu {tc:6.3f} s"
              f"   wall {tw:6.3f} s")
        self.verdict(f"{n}-interaction replay starts in <= {TARGETS['load_s']:.1f} s CPU",
                     sc <= TARGETS["load_s"], f"session start {sc:.3f} s CPU ({sw:.3f} s wall); "
                     f"load_cassette {lc:.3f} s CPU")
        tracemalloc.start()
        session = _start_stop(path, keep=True)
        held, peak = tracemalloc.get_traced_memory()
        session.stop()  # type: ignore[attr-defined]
        tracemalloc.stop()
        print(f"peak memory, replay session start at {n}: {peak / 2**20:,.1f} MiB "
              f"({peak / n / 1024:,.1f} KiB/interaction; {held / 2**20:,.1f} MiB held)")
        small = min(self.args.sizes)
        rollouts = self._take(small)
        path = self.tmp / f"hermes-{_synthetic.count(rollouts)}.jsonl"
        tracemalloc.start()
        _hermes.replay(path, rollouts)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"peak memory, load + replay of {small} through the SDK: {peak / 2**20:,.1f} MiB")
        vn = _synthetic.count(self._take(max(self.args.vcr_sizes)))
        yaml_path = self.tmp / f"vcr-{vn}.yaml"
        if yaml_path.exists():
            from vcr.persisters.filesystem import FilesystemPersister
            from vcr.serializers import yamlserializer

            tracemalloc.start()
            FilesystemPersister.load_cassette(str(yaml_path), yamlserializer)
            _, vpeak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"peak memory, vcrpy load of {vn}: {vpeak / 2**20:,.1f} MiB "
                  f"({vpeak / vn / 1024:,.1f} KiB/interaction)")

    # ------------------------------------------------------------------ recording

    def recording(self) -> None:
        rollouts = self._take(self.args.record_requests)
        n = _synthetic.count(rollouts)
        print(f"\n== recording: {n} requests to the scripted endpoint on loopback; pass-through "
              f"and recording group by group (ABBA) in one loop; median of "
              f"{self.args.record_reps} runs")
        runs = _record.measure(rollouts, self.args.record_reps)
        med = {mode: [statistics.median(r[i] for r in rs) for i in range(3)]
               for mode, rs in runs.items()}
        (pw, pc, pe), (rw, rc, re_) = med["passthrough"], med["record"]
        for name, (w, c, e) in (("pass-through", (pw, pc, pe)), ("record", (rw, rc, re_))):
            print(f"{name + ':':<14} wall {_ms(w, n)} ms/req   client cpu {_ms(c, n)}   "
                  f"endpoint cpu {_ms(e, n)}   total cpu {_ms(c + e, n)}")
        print(f"recording costs the client {(rc - pc) / n * 1e3:+.3f} ms CPU per request "
              f"({rc / pc:.3f}x the client's pass-through CPU); wall {rw / pw:.3f}x")
        total = (rc + re_) / (pc + pe)
        # Judged on wall time (what recording costs the person running it) and on the
        # client's own CPU (in a deployment of many concurrent rollouts the env worker's CPU
        # is the bottleneck). The endpoint's CPU is printed, not judged: the stand-in's own
        # CPU moves with how its client paces requests (about +0.9 ms/request for identical
        # requests), which is not work the recorder does.
        extra_ms = (rc - pc) / n * 1e3
        self.verdict(f"recording costs the client <= +{TARGETS['record_cpu_ms']:.1f} ms CPU "
                     "per request", extra_ms <= TARGETS["record_cpu_ms"],
                     f"{extra_ms:+.2f} ms/request ({rc / pc:.3f}x the client's pass-through "
                     "CPU, paired)")
        self.verdict(f"recording <= {TARGETS['record_ratio']:.2f}x pass-through (wall)",
                     rw / pw <= TARGETS["record_ratio"],
                     f"{rw / pw:.3f}x wall (paired); CPU: {rc / pc:.3f}x client-only "
                     f"({(rc - pc) / n * 1e3:+.2f} ms/request), {total:.3f}x client + endpoint")

    def report(self) -> int:
        print("\n== targets")
        for name, ok, detail in self.verdicts:
            print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
        return 0 if all(ok for _, ok, _ in self.verdicts) else 1


def _timed(fn: object) -> Timing:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()  # type: ignore[operator]
    return time.perf_counter() - w0, time.process_time() - c0


def _start_stop(path: Path, keep: bool = False) -> object:
    session = hermes_replay.cassette(path, mode="replay")
    session.start()
    if not keep:
        session.stop()
    return session


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=ints, default=None,
                   help="interaction counts for replay vs floor (default 1000,10000)")
    p.add_argument("--vcr-sizes", type=ints, default=None,
                   help="interaction counts for vcrpy, which is quadratic (default 20,40,80)")
    p.add_argument("--reps", type=int, default=None, help="interleaved runs per mode (3)")
    p.add_argument("--record-requests", type=int, default=None, help="requests recorded (400)")
    p.add_argument("--record-reps", type=int, default=None, help="runs per mode (3)")
    p.add_argument("--turns", type=int, default=10, help="turns per rollout (10)")
    p.add_argument("--instructions", action=argparse.BooleanOptionalAction, default=None,
                   help="also count instructions per request under callgrind (default: on "
                        "if valgrind is installed, off with --quick)")
    p.add_argument("--instr-sizes", type=ints, default=[80, 240],
                   help="the two request counts whose difference callgrind measures (80,240)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes: proves the script works (seconds), measures nothing")
    p.add_argument("--profile-process", action=argparse.BooleanOptionalAction, default=None,
                   help="also profile the end-to-end replay of a process cassette "
                        "(default: on, off with --quick)")
    args = p.parse_args(argv)
    quick = {"sizes": [40, 160], "vcr_sizes": [10, 20], "reps": 1, "record_requests": 10,
             "record_reps": 1, "profile_process": False, "instructions": False}
    full = {"sizes": [1000, 10000], "vcr_sizes": [20, 40, 80], "reps": 3,
            "record_requests": 400, "record_reps": 3, "profile_process": True,
            "instructions": True}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # see progress live
    began = time.perf_counter()
    print("hermes_replay replay benchmark" + (" (--quick: sizes too small to judge)"
                                                 if args.quick else ""))
    print("\n".join(machine()))
    print(f"traffic: {args.turns}-turn tool-calling rollouts, GRPO groups of 8, 6 tool schemas; "
          f"sizes {args.sizes}, vcrpy sizes {args.vcr_sizes}, {args.reps} reps")
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        bench.instructions()
        bench.replay_vs_floor()
        bench.vcrpy()
        bench.load_and_memory()
        bench.recording()
        if args.profile_process:
            from benchmarks import _profile_process

            _profile_process.main(Path(tmp))
        code = bench.report() if not args.quick else (bench.report() and 0)
    print(f"\n(total {time.perf_counter() - began:.0f} s; load average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
