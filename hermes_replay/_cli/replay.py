"""``hermes-replay replay`` — re-run recorded environments offline and report what changed.

Two forms:

* ``replay [CASSETTE_OR_DIR] [-j N] [--out DIR] [--strict] [--fail-on-change]`` (the main
  job): for every cassette, run its recorded command (``header.env_file`` +
  ``header.command``) in replay mode — in N worker processes with ``-j N`` (default: the cores;
  see ``_parallel``) — with output paths moved into ``--out``, print a summary per cassette
  plus a final table, then write ``<out>/report.html`` (``hermes-replay report``; needs the
  ``report`` extra) and print its path, and ``<out>/replay.json`` (``_manifest``). With
  ``--shard I/N`` (or inside a Slurm array) only that shard of the folder (``_shard``);
  ``hermes-replay results`` joins the shards' out folders. ``--executor ray`` runs each
  cassette as a task on warm actors of a Ray cluster instead (``_ray``).
* ``replay ENV_FILE [--cassette PATH] [--strict] -- MODE [env flags]``: one run, your flags.
* ``replay [CASSETTE_OR_DIR] --twice``: each cassette replayed twice in fresh interpreters; the
  first request field, tool result or reward that differs is reported with the
  ``normalizers``/``ignore_paths`` entry (or the note to seed) that fixes it; exit 1 if any.

Tool calls are answered from the cassette by default (``--tools replay``): nothing the cassette
says is executed, no sandbox is made. ``--tools execute`` runs them again and reports each
result that drifted from the recording; ``--tool NAME=replay|execute`` sets one tool's policy.

Exit codes: 0 all replayed (changed rewards are shown, not fatal unless --fail-on-change);
1 misses, unused recordings or drifted tool results under --strict, a bad cassette or a failing
environment; 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from hermes_replay._cli._executor import (
    ExecutorError,
    add_executor_args,
    check_executor_args,
    executor_options,
)
from hermes_replay._cli._live import add_live_args, live_options, refused_with, rescore_stats
from hermes_replay._cli._manifest import Manifest, ManifestRow, write_manifest
from hermes_replay._cli._parallel import default_jobs
from hermes_replay._cli._run_summary import RunSummary
from hermes_replay._cli._runner import (
    ENV_MODES,
    add_env_command,
    add_matching_options,
    add_tool_policy_args,
    check_env_args,
    default_cassette_path,
    env_log_path,
    matching_options,
    run_with_progress,
    tool_options,
)
from hermes_replay._cli._shard import Shard, ShardError, parse_shard, shard_from_slurm, take_shard
from hermes_replay._cli._worker import add_worker_flag, given_worker, worker_variable
from hermes_replay._runner.plan import find_cassettes, replay_argv, special_file_problem
from hermes_replay._runner.stall import DEFAULT_MAX_MISSES
from hermes_replay._terminal.render import Progress, Style, fmt_reward, sanitize, table

NOTHING_RECORDED = "nothing recorded yet — record one with: hermes-replay record"


def register(sub: Any) -> None:
    p = add_env_command(
        sub,
        "replay",
        help="re-run recorded environments offline and report rewards, misses, changes",
        usage=(
            "hermes-replay replay [CASSETTE_OR_DIR] [-j N] [--shard I/N] [--out DIR] [--strict] "
            "[--fail-on-change] [--no-report] [-v]\n"
            "       hermes-replay replay ENV_FILE [--cassette PATH] [--strict] "
            "-- serve|process|evaluate [env flags]"
        ),
        description=(
            "Without `--`: replay every cassette under CASSETTE_OR_DIR (default ./cassettes) by "
            "re-running its recorded command offline, outputs into --out. With `--`: run "
            "ENV_FILE's CLI with your flags against one cassette. No endpoint, no key."
        ),
        epilog=(
            "exit codes: 0 replayed (reward changes are shown, not fatal without "
            "--fail-on-change); 1 misses, unused recordings with --strict, a bad cassette or "
            "a failing environment; 2 usage errors"
        ),
    )
    p.add_argument(
        "target",
        nargs="?",
        default="cassettes",
        metavar="CASSETTE_OR_DIR|ENV_FILE",
        help="a cassette, a folder of cassettes (default: ./cassettes), or an env file with `--`",
    )
    p.add_argument("--cassette", type=Path, metavar="PATH",
                   help="with ENV_FILE: the cassette (default: cassettes/<env stem>/<mode>.jsonl)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="output folder (default: a new ./replay-out/<UTC time>/)")
    p.add_argument(
        "--strict", action="store_true", help="fail when recordings were never requested"
    )
    add_tool_policy_args(p)
    p.add_argument(
        "--twice", action="store_true",
        help="replay each cassette twice in fresh interpreters and report the first request "
        "field, tool result or reward that differs (exit 1 when they differ)",
    )
    p.add_argument(
        "--fail-on-change",
        action="store_true",
        help="exit 1 when a reward differs from the recorded one (default: shown, exit 0)",
    )
    add_matching_options(p)
    p.add_argument(
        "--allow-network", action="store_true",
        help="let the environment reach hosts other than loopback (default: refused — replay "
        "is offline; a connection or DNS lookup fails at once, naming the host)")
    p.add_argument(
        "--max-misses", type=int, default=DEFAULT_MAX_MISSES, metavar="N",
        help=f"stop a replay after N misses with no request answered in between (default "
        f"{DEFAULT_MAX_MISSES}; 0 = never): offline, a run that keeps missing never finishes")
    p.add_argument(
        "--trust-cassette",
        action="store_true",
        help="run tool commands the cassette makes execute on this host WITHOUT kernel "
        "isolation (default: inside bubblewrap; only for cassettes you trust)",
    )
    p.add_argument(
        "-j", "--jobs", type=int, metavar="N",
        help="replay the cassettes of a folder in N worker processes (default: the number of "
        "cores; 1 = one after another in this process); one table and exit code for all")
    p.add_argument(
        "--shard", metavar="I/N",
        help="replay only the I-th of N shards of the folder (I from 1; a stable split by "
        "cassette path, so N jobs cover each cassette once; default inside a Slurm array "
        "job: from SLURM_ARRAY_TASK_ID/COUNT/MIN); join the out folders with "
        "`hermes-replay results`")
    add_executor_args(p)
    add_live_args(p)
    p.add_argument(
        "-v", "--verbose",
        action="store_true",
        help="show each environment's own output, atroposlib's config dump and warnings "
        "included (default: into <out>/<cassette>/env.log, or with ENV_FILE -- MODE a log "
        "file named at the start) and every miss's diff in full",
    )
    add_worker_flag(p)
    p.add_argument(
        "--no-report", dest="report", action="store_false",
        help="do not write <out>/report.html (an HTML page of the run; needs the 'report' "
        "extra)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        live = live_options(args)
    except ValueError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return 2
    refused = refused_with(args) if live else None
    if refused:
        print(f"hermes-replay replay: {refused}", file=sys.stderr)
        return 2
    if args.env_args is not None:
        return _run_env(args)
    if str(args.target).endswith(".py"):
        print(
            f"hermes-replay replay: {args.target} is an environment file; say what to run after "
            f"`--`, e.g.\n  hermes-replay replay {args.target} -- process --env.total_steps 2\n"
            "or give a cassette / folder of cassettes instead.",
            file=sys.stderr,
        )
        return 2
    if args.cassette is not None:
        print("hermes-replay replay: --cassette goes with ENV_FILE -- MODE …; to replay a "
              f"cassette directly, pass it as the argument: hermes-replay replay {args.cassette}",
              file=sys.stderr)
        return 2
    try:
        tools = {**tool_options(args), **_guards(args)}
    except ValueError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print(f"hermes-replay replay: -j {args.jobs}: give 1 or more worker processes "
              "(default: the number of cores).", file=sys.stderr)
        return 2
    problem = check_executor_args(args)
    if problem:
        print(f"hermes-replay replay: {problem}", file=sys.stderr)
        return 2
    try:
        shard = parse_shard(args.shard) if args.shard is not None else shard_from_slurm(os.environ)
    except ShardError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return 2
    if args.twice:
        if shard is not None or args.executor != "local":
            print("hermes-replay replay: --twice runs in this process, one cassette after "
                  "another; it takes no --shard or --executor", file=sys.stderr)
            return 2
        return replay_twice_all(Path(args.target), out=args.out, **matching_options(args),
                                **tools)
    return replay_all(Path(args.target), out=args.out, strict=args.strict,
                      fail_on_change=args.fail_on_change, verbose=args.verbose,
                      options=matching_options(args), report=args.report, jobs=args.jobs,
                      shard=shard, executor=executor_options(args), **tools, **live)


def _guards(args: argparse.Namespace) -> dict[str, Any]:
    """What keeps a replay offline and bounded (see ``_runner.offline``), from the flags."""
    return {"block_network": not args.allow_network, "max_misses": args.max_misses}


# --------------------------------------------------------------------------- one run


def _run_env(args: argparse.Namespace) -> int:
    from hermes_replay._cli.record import resolve_env
    from hermes_replay._runner.run import run_env

    resolved = resolve_env("replay", str(args.target))
    problem = (resolved if isinstance(resolved, str) else None) or check_env_args(
        "replay", args.target, args.env_args
    )
    try:
        tools = {**tool_options(args), **_guards(args)}
    except ValueError as exc:
        problem = f"hermes-replay replay: {exc}"
    if problem:
        print(problem, file=sys.stderr)
        return 2
    env_file, module = resolved  # type: ignore[misc]
    from hermes_replay._runner.env_guard import NotAnEnvFile
    from hermes_replay._runner.env_guard import check_env_file as check_env_source

    try:
        check_env_source(env_file)
    except NotAnEnvFile as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return 2
    cassette = args.cassette or default_cassette_path(env_file, args.env_args[0])
    worker = given_worker("replay", args)
    if isinstance(worker, int):
        return worker
    if not cassette.exists():  # a file, or the .shards folder of a recording not merged yet
        print(
            f"hermes-replay replay: no cassette at {cassette}. Next step: record one with\n"
            f"  hermes-replay record {env_file} --endpoint URL --model NAME -- "
            f"{' '.join(args.env_args)}\nor pass --cassette PATH.",
            file=sys.stderr,
        )
        return 2
    argv = replay_argv(_header_command(cassette), list(args.env_args))
    log = None if args.verbose else env_log_path("replay", env_file, args.env_args[0])
    if log is not None:
        print(f"hermes-replay replay: environment output: {log} (-v shows it here)",
              file=sys.stderr)
    with worker_variable(worker):
        summary, _ = run_with_progress(
            partial(run_env, env_file, argv, cassette=cassette, mode="replay", module=module,
                    strict=args.strict, worker=worker, log_path=log,
                    **matching_options(args), **tools),
            mode="replay", cassette=cassette, label=f"replaying {cassette}", log_path=log,
            verbose=args.verbose, normalizers=matching_options(args).get("normalizers"))
    print("\n".join(summary.lines(Style(sys.stdout))))
    return _exit_code([summary], args.fail_on_change)


def _header_command(cassette: Path) -> list[str]:
    from hermes_replay import load_cassette

    try:
        return list(load_cassette(cassette).header.command or [])
    except Exception:
        return []


def _exit_code(summaries: list[RunSummary], fail_on_change: bool) -> int:
    if any(s.error or s.exit_code or s.misses for s in summaries):
        return 1
    if fail_on_change and any(s.changed for s in summaries):
        return 1
    return 0


# --------------------------------------------------------------------------- the main job


@dataclass
class _Row:
    cassette: str
    mode: str
    summary: RunSummary


def _fresh_out_dir(shard: Shard | None = None) -> Path:
    """A new ``./replay-out/<UTC time>/``; a shard's goes below its Slurm array job's id
    when there is one (``replay-out/<job id>/shard-2-of-8``), so one array's shards sit
    side by side for ``hermes-replay results replay-out/<job id>/*``."""
    array_job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if shard is not None and array_job:
        return Path("replay-out") / f"slurm-{array_job}" / shard.folder_name
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    if shard is not None:
        stamp += f"-{shard.folder_name}"
    out = Path("replay-out") / stamp
    n = 1
    while out.exists():
        n += 1
        out = Path("replay-out") / f"{stamp}-{n}"
    return out


def _nothing_to_replay(target: Path) -> int:
    """No cassette under ``target``: exit 2, as ``verify`` does. A CI step that replays an
    empty (or missing default) folder has tested nothing, and must not pass as if it had."""
    print(f"hermes-replay replay: no cassette in {target}, so nothing was replayed "
          f"({NOTHING_RECORDED} ENV_FILE --endpoint URL --model NAME -- process). Next step: "
          "record one, or pass the folder that holds them.", file=sys.stderr)
    return 2


def replay_all(
    target: Path, *, out: Path | None, strict: bool, fail_on_change: bool, verbose: bool = False,
    options: dict[str, Any] | None = None, report: bool = True, jobs: int | None = None,
    shard: Shard | None = None, executor: dict[str, Any] | None = None, **tools: Any,
) -> int:
    if not target.exists() and target != Path("cassettes"):
        print(
            f"hermes-replay replay: {target} does not exist. Next step: pass a cassette file or "
            "a folder of cassettes (default ./cassettes).",
            file=sys.stderr,
        )
        return 2
    problem = special_file_problem(target)
    if problem is not None:
        print(f"hermes-replay replay: {problem}", file=sys.stderr)
        return 2
    from hermes_replay._cassette.merge import is_merged_shard

    # shards already merged are replayed through their merged cassette, not twice
    cassettes = [c for c in find_cassettes(target) if not (target.is_dir() and is_merged_shard(c))]
    if not cassettes:
        return _nothing_to_replay(target)
    rels = [c.relative_to(target) if target.is_dir() else Path(c.name) for c in cassettes]
    manifest = Manifest(corpus=str(target), shard=None if shard is None else str(shard),
                        corpus_cassettes=[r.as_posix() for r in rels])
    names = _output_names(rels)  # over the whole corpus: the same in every shard
    if shard is not None:
        keep = take_shard(rels, shard)
        cassettes, rels = [cassettes[i] for i in keep], [rels[i] for i in keep]
        names = [names[i] for i in keep]
        print(f"hermes-replay replay: shard {shard}: {len(cassettes)} of "
              f"{len(manifest.corpus_cassettes)} cassettes", file=sys.stderr)
    out = out or _fresh_out_dir(shard)
    style = Style(sys.stdout)
    tools = {**(options or {}), **tools}  # both are keyword options of run_cassette
    outs = [out / name for name in names]
    workers = min(jobs or default_jobs(), max(1, len(cassettes)))
    if executor and executor.get("executor") == "ray":
        from hermes_replay._cli._ray import replay_on_ray

        try:
            outcomes, interrupted = replay_on_ray(replay_cassette, cassettes, outs, strict,
                                                  verbose, tools, style, jobs=jobs, **executor)
            rows = [_Row(str(cassettes[o.index]), o.mode, o.summary) for o in outcomes]
        except ExecutorError as exc:
            print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
            return 2
    elif workers > 1:
        rows, interrupted = _replay_in_processes(cassettes, outs, workers, strict, verbose,
                                                 tools, style)
    else:
        rows, interrupted = [], False
        for cassette, out_dir in zip(cassettes, outs, strict=True):
            summary, mode = replay_cassette(cassette, out_dir, strict, verbose, tools)
            rows.append(_Row(str(cassette), mode, summary))
            print("\n".join(summary.lines(style)))
            if summary.exit_code in (130, 143):  # Ctrl-C/SIGTERM: stop, still show what was done
                interrupted = True
                break
    by_path = {str(c): rel.as_posix() for c, rel in zip(cassettes, rels, strict=True)}
    manifest.rows = [ManifestRow(by_path.get(r.cassette, r.cassette), r.cassette, r.mode,
                                 r.summary) for r in rows]
    manifest.complete = not interrupted
    write_manifest(out, manifest)
    print()
    print(_final_table(rows, style))
    print(f"outputs: {out}")
    if interrupted:
        return rows[-1].summary.exit_code if rows and rows[-1].summary.exit_code else 130
    if report:
        from hermes_replay._report import report_line

        print(report_line(out))
    code = _exit_code([r.summary for r in rows], fail_on_change)
    if any(r.summary.changed for r in rows) and not code:
        print("rewards changed (shown above); pass --fail-on-change to make that exit 1")
    return code


def replay_twice_all(target: Path, *, out: Path | None, **tools: Any) -> int:
    """``replay --twice``: each cassette replayed twice, the first difference reported."""
    from hermes_replay._runner.twice import replay_twice

    if not target.exists():
        print(f"hermes-replay replay: {target} does not exist. Next step: pass a cassette file "
              "or a folder of cassettes.", file=sys.stderr)
        return 2
    cassettes = find_cassettes(target)
    if not cassettes:
        return _nothing_to_replay(target)
    out = out or _fresh_out_dir()
    differ = 0
    for cassette in cassettes:
        rel = cassette.relative_to(target) if target.is_dir() else Path(cassette.name)
        print(f"replaying {cassette} twice …", file=sys.stderr)
        report = replay_twice(cassette, out / rel.with_suffix(""), **tools)
        print("\n".join(report.lines()))
        differ += not report.deterministic
    print(f"{len(cassettes) - differ} of {len(cassettes)} cassette(s) replay the same twice; "
          f"outputs: {out}")
    return 1 if differ else 0


def _output_names(rels: list[Path]) -> list[Path]:
    """Each cassette's output folder under --out, one per cassette: ``x.jsonl`` and
    ``x.jsonl.zst`` side by side (what ``compact -o`` leaves) would share ``x/`` — one
    result.json, one rescored file — so the compressed one then gets ``x.zst/``."""
    names = [_output_name(rel) for rel in rels]
    taken = Counter(names)
    return [name.with_name(name.name + ".zst") if taken[name] > 1 and rel.name.endswith(".zst")
            else name for rel, name in zip(rels, names, strict=True)]


def _output_name(rel: Path) -> Path:
    """Where a cassette's outputs go under --out: its path without .jsonl / .jsonl.zst."""
    name = rel.name
    for suffix in (".jsonl.zst", ".jsonl"):
        if name.endswith(suffix):
            return rel.with_name(name[: -len(suffix)])
    return rel.with_suffix("")


def _replay_in_processes(cassettes: list[Path], outs: list[Path], workers: int, strict: bool,
                         verbose: bool, tools: dict[str, Any],
                         style: Style) -> tuple[list[_Row], bool]:
    from hermes_replay._cli._parallel import Job, replay_in_processes

    print(f"hermes-replay replay: {len(cassettes)} cassettes in {workers} processes",
          file=sys.stderr)
    from hermes_replay._runner.trust import with_trusted_roots

    here, environ = str(Path.cwd()), with_trusted_roots(dict(os.environ))
    jobs = [Job(i, c.resolve(), o.resolve(), strict, verbose, dict(tools), here, environ)
            for i, (c, o) in enumerate(zip(cassettes, outs, strict=True))]

    # on a terminal, a bar over the cassettes (each worker's own progress stays in the
    # worker); piped, the summaries as they come are the progress
    progress = Progress(sys.stderr, label="replaying", unit="cassettes")
    progress.total = len(cassettes)
    if progress.tty:
        progress.start()
    out, err = progress.above(sys.stdout), progress.above(sys.stderr)

    def done(outcome: Any) -> None:
        if outcome.stderr:
            err.write(outcome.stderr)
        outcome.summary.cassette = str(cassettes[outcome.index])
        print("\n".join(outcome.summary.lines(style)), file=out, flush=True)
        if progress.tty:
            progress.item_done(turns=outcome.summary.turns, misses=outcome.summary.misses)

    try:
        outcomes, interrupted = replay_in_processes(replay_cassette, jobs, workers, done)
    finally:
        err.flush()
        progress.close()
    return [_Row(str(cassettes[o.index]), o.mode, o.summary) for o in outcomes], interrupted


def replay_cassette(
    cassette: Path, out_dir: Path, strict: bool, verbose: bool, tools: dict[str, Any]
) -> tuple[RunSummary, str]:
    from hermes_replay import CassetteError, load_cassette
    from hermes_replay._runner.run import run_cassette

    fail = RunSummary(mode="replay", cassette=str(cassette))
    try:
        header = load_cassette(cassette).header
    except CassetteError as exc:
        fail.error = str(exc)
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return fail, "?"
    command = list(header.command or [])
    if not header.env_file or not command or command[0] not in ENV_MODES:
        fail.skipped = (
            "not recorded with `hermes-replay record` (no env file/command in its header); "
            "replay it from its test, or with `hermes-replay replay ENV_FILE --cassette "
            f"{cassette} -- MODE …`"
        )
        return fail, command[0] if command else "?"
    if command[0] == "serve":
        fail.skipped = (
            "a serve run needs a live Atropos API; replay it while the API runs with "
            f"`hermes-replay replay {header.env_file} --cassette {cassette} -- "
            f"{' '.join(command)}`"
        )
        return fail, "serve"
    out_dir = out_dir.resolve()
    if tools.get("live") is not None:
        summary = _rescore_cassette(cassette, out_dir, strict, verbose, dict(tools))
    else:
        log = None if verbose else out_dir / "env.log"
        summary, _ = run_with_progress(
            partial(run_cassette, cassette, out_dir=out_dir, strict=strict, **tools),
            mode="replay", cassette=cassette, log_path=log, verbose=verbose,
            label=f"replaying {cassette.parent.name}/{cassette.name}",
            normalizers=tools.get("normalizers"))
    summary.cassette = str(cassette)
    if summary.log:
        summary.log = _shown(Path(summary.log))
    return summary, command[0]


def _rescore_cassette(cassette: Path, out_dir: Path, strict: bool, verbose: bool,
                      tools: dict[str, Any]) -> RunSummary:
    """``--llm live=…`` (and ``--rescore K``): the cassette replayed K times (default 1) with
    the selected calls live. Run 1 writes ``<out>/<rel>/`` and ``<out>/<rel>.rescored.jsonl``,
    run k ≥ 2 ``<out>/<rel>/rescore-k/`` and ``<out>/<rel>.rescored-k.jsonl``. The row is run
    1's (the first failing run's, if one failed: the rest are then not run), plus per rollout
    the recorded reward beside the K new ones."""
    from hermes_replay._runner.run import run_cassette

    runs = int(tools.pop("rescore", None) or 1)
    spec = tools["live"]
    rewards: list[dict[str, float | None]] = []
    recorded: dict[str, float | None] = {}
    summary: RunSummary | None = None
    first_cassette: Path | None = None
    for k in range(1, runs + 1):
        run_out = out_dir if k == 1 else out_dir / f"rescore-{k}"
        suffix = "" if k == 1 else f"-{k}"
        rescored = out_dir.parent / f"{out_dir.name}.rescored{suffix}.jsonl"
        log = None if verbose else run_out / "env.log"
        label = f"re-scoring {cassette.parent.name}/{cassette.name}" + (
            f" ({k}/{runs})" if runs > 1 else "")
        this, result = run_with_progress(
            partial(run_cassette, cassette, out_dir=run_out, strict=strict, rescored=rescored,
                    **tools),
            mode="replay", cassette=cassette, log_path=log, verbose=verbose, label=label,
            normalizers=tools.get("normalizers"))
        failed = bool(this.error or this.exit_code or this.misses or result is None)
        if summary is None or failed:
            summary = this
        if failed:
            break
        assert result is not None
        recorded = dict(result.recorded_rewards)
        rewards.append(dict(result.rewards))
        if k == 1:
            first_cassette = rescored
    assert summary is not None
    patterns = ", ".join(f"live={p}" for p in spec["patterns"])
    summary.live = f"{patterns} -> {spec['base_url']}"
    if summary.error or summary.exit_code or summary.misses:
        return summary
    summary.rescored_cassette = _shown(first_cassette) if first_cassette else None
    if runs > 1:
        summary.rescore = rescore_stats(recorded, rewards)
        # a reward "changed" when the mean of the K new ones is not the recorded one
        summary.changed = {rid: (s["recorded"], s["mean"])
                           for rid, s in summary.rescore.items()
                           if rid in recorded and _differs(s["recorded"], s["mean"])}
    return summary


def _differs(old: float | None, new: float | None) -> bool:
    if old is None or new is None:
        return (old is None) != (new is None)
    return abs(old - new) > 1e-9


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _final_table(rows: list[_Row], style: Style) -> str:
    body = []
    for r in rows:
        s = r.summary
        if s.skipped:
            status = style("skip", "yellow")
        elif s.error or s.exit_code:
            status = style("ERROR", "red") if not s.misses else style("MISS", "red")
        elif s.misses:
            status = style("MISS", "red")
        elif s.changed:
            status = style("CHANGED", "yellow")
        else:
            status = style("ok", "green")
        body.append([r.cassette, r.mode, s.rollouts, s.turns, s.misses, s.unused,
                     fmt_reward(s.mean_reward), len(s.changed), status])
    headers = ["cassette", "mode", "rollouts", "turns", "misses", "unused", "mean reward",
               "changed", "status"]
    align = "llrrrrrrl"
    if any(r.summary.rescore for r in rows):  # --rescore K: the judge's spread per cassette
        headers.insert(-1, "judge stdev")
        align = align[:-1] + "rl"
        for line, r in zip(body, rows, strict=True):
            spreads = [v["stdev"] for v in r.summary.rescore.values() if v.get("stdev") is not None]
            line.insert(-1, fmt_reward(sum(spreads) / len(spreads)) if spreads else "-")
    return table(headers, body, align=align, style=style)
