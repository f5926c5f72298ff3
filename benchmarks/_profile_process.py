"""Where the time of an end-to-end replay goes: imports, tokenizer, replay, SDK, reward, tools.

A shipped ``cassettes/*/process.jsonl`` is replayed the way users do
(``hermes-replay replay CASSETTE --out DIR``) in a fresh interpreter, so imports are cold, under
``-X importtime`` and cProfile. With no process cassette yet, a synthetic one is replayed
through atroposlib's ``ServerManager`` instead (imports, tokenizer load, replay, a reward step).

The breakdown is inclusive (a category's time includes imports done inside it): read it as
"what would go away if this step were free", not as slices adding up to the total.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (category, path fragment, function name): inclusive times of these functions, summed
CATEGORIES: list[tuple[str, str, str]] = [
    ("imports (all import statements)", "importlib._bootstrap", "_find_and_load"),
    ("tokenizer load (AutoTokenizer)", "tokenization_auto", "from_pretrained"),
    ("cassette load + index (Session.start)", "hermes_replay/_session/session", "start"),
    ("interception per request (httpx/httpx2)", "hermes_replay/_session/intercept/_httpx", "handle_async_request"),  # noqa: E501
    ("interception per request (aiohttp)", "hermes_replay/_session/intercept/_aiohttp", "_request"),
    ("openai SDK chat.completions.create", "openai/resources/chat/completions", "create"),
    ("agent loop (HermesAgentLoop.run)", "environments/agent_loop", "run"),
    ("tool calls (dispatch_tool)", "environments/tools", "dispatch_tool"),
    ("reward (compute_reward)", "environments/", "compute_reward"),
    ("tokens/masks (tokenize_for_trainer)", "", "tokenize_for_trainer"),
    ("env setup (setup)", "environments/", "setup"),
    ("output: HTML (jsonl2html.generate_html)", "jsonl2html", "generate_html"),
    ("wandb (init/log)", "wandb/", "init"),
]


def _categories(stats: pstats.Stats) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, fragment, func in CATEGORIES:
        total = 0.0
        for (path, _line, fname), (_cc, _nc, _tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
            if fname != func or fragment not in path.replace("\\", "/"):
                continue
            # count only outermost calls: skip entries called by another function of the
            # same category (e.g. an overridden compute_reward calling super())
            if any(c[2] == func and fragment in c[0] for c in callers):
                continue
            total += ct
        if total:
            out[name] = total
    return out


def _import_table(stderr: str, top: int = 12) -> tuple[float, list[tuple[str, float]]]:
    """(all import time, self time by top-level package), from ``-X importtime``."""
    agg: dict[str, float] = {}
    total = 0.0
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            pkg = m.group(4).split(".")[0]
            agg[pkg] = agg.get(pkg, 0.0) + int(m.group(1)) / 1e6
            total += int(m.group(1)) / 1e6
    return total, sorted(agg.items(), key=lambda kv: -kv[1])[:top]


def _spawn(kind: str, target: str, out_dir: Path, stats: str) -> tuple[dict[str, Any], str]:
    cmd = [sys.executable, "-X", "importtime", "-m", "benchmarks._profile_process", kind,
           target, str(out_dir), stats]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    last = (proc.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        result: dict[str, Any] = json.loads(last)
    except ValueError:
        result = {}
    if proc.returncode != 0 or "wall" not in result:
        raise RuntimeError(f"profile run failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return result, proc.stderr


def _child(kind: str, target: str, out_dir: str, stats_path: str) -> None:
    """In the fresh interpreter: run the replay (under cProfile unless ``stats_path`` is
    ``-``), dump the stats, print the wall time."""
    t0 = time.perf_counter()
    prof = cProfile.Profile()
    if stats_path != "-":
        prof.enable()
    if kind == "cli":
        from hermes_replay.cli import main as cli_main

        code = cli_main(["replay", target, "--out", out_dir])
    else:
        code = _synthetic_replay(Path(out_dir))
    wall = time.perf_counter() - t0
    if stats_path != "-":
        prof.disable()
        prof.dump_stats(stats_path)
    print(json.dumps({"wall": wall, "exit": code}))


def _synthetic_replay(tmp: Path) -> int:
    """A synthetic 'process' run: ServerManager → openai SDK → cassette, tokens per rollout."""
    import asyncio

    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from atroposlib.envs.server_handling.server_manager import ServerManager
    from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer

    import hermes_replay
    from benchmarks import _drivers, _hermes, _synthetic
    from hermes_replay._tokenizers.bundled import load_tokenizer

    tokenizer = load_tokenizer()
    rollouts = _synthetic.build_traffic(200)
    path = tmp / "synthetic-process.jsonl"
    _hermes.write(path, rollouts, _drivers.capture_requests(rollouts[:8]))
    config = APIServerConfig(model_name=_synthetic.MODEL, base_url=_drivers.BASE_URL,
                             api_key=_drivers.API_KEY, server_type="openai",
                             health_check=False)

    async def main() -> None:
        manager = ServerManager([config])

        async def one(ro: _synthetic.Rollout) -> None:
            with hermes_replay.rollout(ro.id):
                for body in ro.requests:
                    kwargs = {k: v for k, v in body.items() if k != "model"}
                    await manager.chat_completion(**kwargs)
            final = [*ro.requests[-1]["messages"],
                     ro.responses[-1]["choices"][0]["message"]]
            tokenize_for_trainer(tokenizer, [{"role": m["role"], "content":
                                              str(m.get("content") or "")} for m in final])

        for group in _synthetic.groups(rollouts):
            await asyncio.gather(*(one(ro) for ro in group))

    with hermes_replay.cassette(path, mode="replay", strict=True):
        asyncio.run(main())
    return 0


def main(tmp: Path) -> None:
    cassettes = sorted((ROOT / "cassettes").glob("*/process.jsonl"))
    kind, target = ("cli", str(cassettes[0])) if cassettes else ("synthetic", "-")
    label = (f"hermes-replay replay {cassettes[0].relative_to(ROOT)}" if cassettes else
             "synthetic 200-interaction cassette through atroposlib ServerManager (no "
             "cassettes/*/process.jsonl yet)")
    print(f"\n== end-to-end profile: {label}")
    out_dir, stats_path = tmp / "profile-out", tmp / "replay.prof"
    try:
        plain, plain_err = _spawn(kind, target, out_dir / "plain", "-")
        profiled, _ = _spawn(kind, target, out_dir / "profiled", str(stats_path))
    except RuntimeError as exc:
        print(exc)
        return
    imports, table = _import_table(plain_err)
    print(f"plain run (no profiler): {plain['wall']:.2f} s of replay after the CLI started; "
          f"all imports of the process {imports:.2f} s (-X importtime, self times summed)")
    print("  imports by top-level package: " +
          ", ".join(f"{pkg} {sec:.2f}s" for pkg, sec in table))
    stats = pstats.Stats(str(stats_path))
    wall = profiled["wall"]
    print(f"profiled run: {wall:.2f} s (cProfile inflates Python-heavy parts); inclusive:")
    for name, seconds in _categories(stats).items():
        print(f"  {name:<44} {seconds:7.2f} s  {seconds / wall:6.1%}")
    print("hottest functions (own time):")
    stats.sort_stats("tottime")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # type: ignore[attr-defined]
    for (path, line, func), (_cc, nc, tt, ct, _callers) in rows:
        short = "/".join(Path(path).parts[-2:]) if path.startswith("/") else path
        print(f"  {tt:6.2f} s own {ct:6.2f} s cum {nc:>8} calls  {func} ({short}:{line})")


if __name__ == "__main__":
    _child(*sys.argv[1:5])
