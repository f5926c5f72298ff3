"""``hermes-replay probe ENV_FILE [options] [-- env flags]`` — scripted adversarial policies
against the real reward. Everything after ``--`` is the env's own flags for every run (e.g.
``--env.terminal_backend local``), so an env file is probed as it is, without edits.

Exit codes: 0 no finding; 1 at least one finding; 2 usage (argparse, a missing file, a bad
option value).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_replay._cli._runner import ENV_HELP
from hermes_replay._terminal.render import Style

if TYPE_CHECKING:
    from hermes_replay.probe import ProbeReport

HELP = "run scripted adversarial policies through an environment and flag reward hacks"
DESCRIPTION = (
    "Each probe is a scripted policy (empty reply, refusal, restating the prompt, claiming "
    "success, broken or unknown tool calls, tool flooding, a 1 MB reply, tampering with the "
    "sandbox, and the env's known-good reply) run offline through the environment's real "
    "`process` path on a few items. A degenerate probe earning the threshold, a known-good one "
    "scoring low, a reward out of range, NaN or raising, or a different reward when the same "
    "replies are replayed, is a finding. Every run is recorded to cassettes/<env>/probe-<name>"
    ".jsonl, so pytest replays it as a regression snapshot."
)


def _range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LO,HI (e.g. 0,1)") from None
    if not lo < hi:
        raise argparse.ArgumentTypeError(f"reward range {text!r}: LO must be below HI")
    return lo, hi


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "probe", help=HELP, description=DESCRIPTION,
        usage="hermes-replay probe ENV_FILE [options] [-- ENV FLAGS]",
        epilog="env flags after `--` go to every run, e.g.: hermes-replay probe my_env.py "
        "--known-good 'ANSWER: {answer}' -- --env.terminal_backend local. "
        "Exit codes: 0 no finding; 1 a finding; 2 usage")
    p.add_argument("env_file", metavar="ENV_FILE", help=ENV_HELP)
    p.add_argument("--items", type=int, default=3, metavar="N",
                   help="items each probe runs on (default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for CI)")
    p.add_argument("--probe", action="append", dest="probes", metavar="NAME",
                   help="run only this probe (repeatable); see --list")
    p.add_argument("--probes", action="append", dest="probe_files", default=[], metavar="FILE",
                   help="load more probes from FILE (repeatable); <env stem>_probes.py beside "
                   "the env file is loaded by itself")
    p.add_argument("--list", action="store_true", help="list the probes and exit")
    p.add_argument("--threshold", type=float, metavar="X",
                   help="degenerate probes scoring >= X are findings (default: the middle of "
                   "the reward range, or the known-good mean if lower)")
    p.add_argument("--reward-range", type=_range, metavar="LO,HI",
                   help="the reward's declared range (default: the env's reward_range, [0, 1])")
    p.add_argument("--known-good", metavar="TEMPLATE", dest="known_good",
                   help="the known-good reply for each item, from its fields (e.g. "
                   "'{reference}' or 'ANSWER: {answer}'), instead of the env's "
                   "known_good_reply hook: for env files you do not edit")
    p.add_argument("--judge", default="examples", metavar="SCRIPT",
                   help="scripted-endpoint script answering judge-style requests "
                   "(default: examples)")
    p.add_argument("--server-type", choices=("openai", "vllm", "sglang"), default="openai",
                   help="the atroposlib server type the probe's stand-in is spoken to with "
                   "(default openai; vllm/sglang for envs that need /generate, e.g. "
                   "tokens_and_logprobs_completion)")
    p.add_argument("--cassettes", type=Path, metavar="DIR",
                   help="where the probe cassettes go (default cassettes/<env file stem>)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="keep each probe's outputs and env.log in DIR (default: a temp folder)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._runner.env_target import module_as_file
    from hermes_replay.probe import (
        ProbeRun,
        list_probes,
        load_probe_files,
        probe_env_args,
        run_probes,
    )

    env = Path(module_as_file(args.env_file))
    if not env.is_file() or env.suffix != ".py":
        print(f"hermes-replay probe: {env} is not an environment file; pass the .py file that "
              "ends with `MyEnv.cli()` (e.g. environments/my_env.py)", file=sys.stderr)
        return 2
    if args.items < 1:
        print("hermes-replay probe: --items must be at least 1", file=sys.stderr)
        return 2
    try:
        env_args = probe_env_args(args.env_args or [])
        load_probe_files(env, args.probe_files)
    except (OSError, ValueError) as exc:
        print(f"hermes-replay probe: {exc}", file=sys.stderr)
        return 2
    available = {p.name: p for p in list_probes(env.stem)}
    if args.list:
        for probe in available.values():
            print(f"{probe.name:<20} {probe.kind:<10} {probe.description}")
        return 0
    unknown = [n for n in args.probes or [] if n not in available]
    if unknown:
        print(f"hermes-replay probe: no probe named {', '.join(unknown)}; available: "
              f"{', '.join(available)}", file=sys.stderr)
        return 2
    for name, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                        "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}.items():
        os.environ.setdefault(name, value)

    def progress(run: ProbeRun) -> None:
        rewards = [r for r in run.rewards.values() if r is not None]
        mean = f"{sum(rewards) / len(rewards):.2f}" if rewards else "-"
        print(f"  probe {run.probe.name}: {len(rewards)} rollouts, mean {mean}", file=sys.stderr)

    work = args.out if args.out is not None else Path(tempfile.mkdtemp(prefix="probe-"))
    report = run_probes(env, items=args.items, probes=args.probes, cassette_dir=args.cassettes,
                        work_dir=work, threshold=args.threshold,
                        reward_range=args.reward_range, judge=args.judge,
                        on_probe=None if args.json else progress, env_args=env_args,
                        known_good=args.known_good, server_type=args.server_type)
    if args.json:
        print(report.dumps())
    else:
        print("\n".join(report.lines(Style(sys.stdout))))
        where = args.cassettes or Path("cassettes") / env.stem
        print(f"  cassettes: {where}/probe-*.jsonl (pytest replays them)")
        print("  tool sandbox: " + ("bubblewrap (kernel isolation), record and replay"
                                    if report.sandbox == "bwrap" else
                                    "none while recording (your HERMES_SANDBOX=none); "
                                    "bubblewrap on replay"))
        print(f"  {_html_report(report, work)}")
    return 0 if report.ok else 1


def _html_report(report: ProbeReport, work: Path) -> str:
    """The probe cassettes of this run as one HTML page (``hermes-replay report``), in
    ``work/report/``; the line to print (never fails the run)."""
    from hermes_replay._report import report_line

    folder = work / "report"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    copied = 0
    for row in report.rows:
        cassette = Path(row.cassette)
        if cassette.is_file() and row.rollouts:
            shutil.copy2(cassette, folder / cassette.name)
            copied += 1
    if not copied:  # every probe crashed: the findings above say why; nothing to show
        return "report: none (no probe recorded a rollout)"
    return report_line(folder)
