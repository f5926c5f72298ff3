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
from functools import partial
from pathlib import Path
from typing import Any

from hermes_replay._cli._executor import add_executor_args, check_executor_args, executor_options
from hermes_replay._cli._live import add_live_args, live_options, refused_with
from hermes_replay._cli._runner import (
    add_env_command,
    add_matching_options,
    add_tool_policy_args,
    check_env_args,
    default_cassette_path,
    env_log_path,
    matching_options,
    quiet,
    run_with_progress,
    tool_options,
)
from hermes_replay._cli._worker import add_worker_flag, given_worker, worker_variable
from hermes_replay._corpus.corpus import CorpusObserver, CorpusResult, replay_corpus
from hermes_replay._corpus.discover import NOTHING_RECORDED
from hermes_replay._corpus.errors import CorpusError
from hermes_replay._corpus.one import CassetteResult, RunHooks
from hermes_replay._corpus.shard import ShardError, parse_shard, shard_from_slurm
from hermes_replay._corpus.summary import RunSummary, exit_code, status
from hermes_replay._runner.stall import DEFAULT_MAX_MISSES
from hermes_replay._terminal.render import Progress, Style, fmt_reward, sanitize, table

__all__ = ["NOTHING_RECORDED", "final_table", "register", "run"]

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
        "--trace", type=Path, metavar="FILE",
        help="with ENV_FILE -- MODE: write what the run did to FILE (JSON lines: each request "
        "as matching saw it, each tool call, each reward) — the record `--twice` and `check` "
        "compare; two runs' traces tell what differs between them")
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
    if args.trace is not None:
        print("hermes-replay replay: --trace goes with ENV_FILE -- MODE … (one run, one "
              "trace); for a folder, --twice compares two runs of each cassette",
              file=sys.stderr)
        return 2
    if args.cassette is not None:
        print("hermes-replay replay: --cassette goes with ENV_FILE -- MODE …; to replay a "
              f"cassette directly, pass it as the argument: hermes-replay replay {args.cassette}",
              file=sys.stderr)
        return 2
    try:
        options = _run_options(args, live.get("live"))
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
        return replay_twice_all(Path(args.target), args.out, options)
    style = Style(sys.stdout)
    try:
        done = replay_corpus(args.target, options, out=args.out, jobs=args.jobs, shard=shard,
                             fail_on_change=args.fail_on_change, verbose=args.verbose,
                             rescore=live.get("rescore"), report=args.report,
                             observer=_Printer(style, args.verbose),
                             **executor_options(args))
    except CorpusError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return exc.exit_code
    return _present(done, style)


def _run_options(args: argparse.Namespace, live: Any = None) -> Any:
    """The ``RunOptions`` the flags give; ValueError names a bad one."""
    from hermes_replay._runner.options import RunOptions

    return RunOptions.of(where="hermes-replay replay", strict=args.strict, live=live,
                         **tool_options(args), **matching_options(args), **_guards(args))


def _guards(args: argparse.Namespace) -> dict[str, Any]:
    """What keeps a replay offline and bounded (see ``_runner.offline``), from the flags."""
    return {"block_network": not args.allow_network, "max_misses": args.max_misses}


# --------------------------------------------------------------------------- one run


def _run_env(args: argparse.Namespace) -> int:
    from hermes_replay._corpus.corpus import default_out
    from hermes_replay._runner.env_form import run_env_form
    from hermes_replay._runner.env_target import resolve_env

    resolved = resolve_env("replay", str(args.target))
    problem = ((resolved if isinstance(resolved, str) else None)
               or check_env_args("replay", args.target, args.env_args))
    options = None
    try:
        options = _run_options(args)
    except ValueError as exc:
        problem = problem or f"hermes-replay replay: {exc}"
    if problem:
        print(problem, file=sys.stderr)
        return 2
    env_file, module = resolved  # type: ignore[misc]
    from hermes_replay._runner.env_guard import NotAnEnvFile, check_env_file

    try:
        check_env_file(env_file)
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
    from hermes_replay._errors import CassetteError
    from hermes_replay._runner.portable import replay_command

    try:
        argv = replay_command(cassette, list(args.env_args))
    except CassetteError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return 1
    log = None if args.verbose else env_log_path("replay", env_file, args.env_args[0])
    if log is not None:
        print(f"hermes-replay replay: environment output: {log} (-v shows it here)",
              file=sys.stderr)
    out = args.out or default_out()
    with worker_variable(worker):
        summary, _ = run_with_progress(
            partial(run_env_form, env_file, argv, cassette=cassette, out=out, module=module,
                    log_path=log, options=options.replace(worker=worker, trace=_trace_path(args))),
            mode="replay", cassette=cassette, label=f"replaying {cassette}", log_path=log,
            verbose=args.verbose, normalizers=list(options.normalizers))
    print("\n".join(summary.lines(Style(sys.stdout))) + f"\noutputs: {out}")
    return exit_code([summary], args.fail_on_change)


def _trace_path(args: argparse.Namespace) -> Path | None:
    """``--trace`` as an absolute path: the environment may change the working folder before
    the session writes it at the end."""
    return None if args.trace is None else args.trace.resolve()


# --------------------------------------------------------------------------- the main job


class _Printer(CorpusObserver):
    """The main job on a terminal or in a CI log: each cassette's summary as it finishes
    (what it printed above it), a live progress line while one runs in this process, a bar
    over the cassettes while workers run them (on a terminal; piped, the summaries as they
    come are the progress)."""

    def __init__(self, style: Style, verbose: bool) -> None:
        self.style = style
        self.verbose = verbose
        self.progress: Progress | None = None  # the one cassette running here
        self.bar: Progress | None = None  # over the cassettes, with workers
        self.out: Any = sys.stdout
        self.err: Any = sys.stderr

    def started(self, count: int, workers: int, executor: str) -> None:
        if workers > 1 and executor == "local":
            self.bar = Progress(sys.stderr, label="replaying", unit="cassettes")
            self.bar.total = count
            if self.bar.tty:
                self.bar.start()
            self.out, self.err = self.bar.above(sys.stdout), self.bar.above(sys.stderr)

    def cassette_started(self, job: Any) -> RunHooks:
        from hermes_replay._runner.fd_capture import terminal_stream

        cassette = job.cassette
        self.progress = Progress(terminal_stream(sys.stderr),
                                 label=f"replaying {cassette.parent.name}/{cassette.name}")
        self.progress.start()
        progress = self.progress
        return RunHooks(output=lambda log: quiet(log, progress),
                        on_rollout=progress.rollout_done, on_event=progress.event)

    def cassette_done(self, result: CassetteResult) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        for text in (result.output, result.message):
            if text:
                self.err.write(text if text.endswith("\n") else text + "\n")
        self.err.flush()
        print("\n".join(result.summary.lines(self.style)), file=self.out, flush=True)
        if self.bar is not None and self.bar.tty:
            self.bar.item_done(turns=result.summary.turns, misses=result.summary.misses)

    def note(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def finished(self) -> None:
        if self.progress is not None:
            self.progress.close()
        if self.bar is not None:
            self.err.flush()
            self.bar.close()


def _present(done: CorpusResult, style: Style) -> int:
    """The final table, where the outputs are, the report and the exit code."""
    print()
    print(final_table([(str(r.cassette), r.mode, r.summary) for r in done.results], style))
    print(f"outputs: {done.out}")
    if done.interrupted:
        return done.exit_code
    if done.report_note:
        print(done.report_note)
    code = done.exit_code
    if done.changed and not code:
        print("rewards changed (shown above); pass --fail-on-change to make that exit 1")
    return code


def replay_twice_all(target: Path, out: Path | None, options: Any) -> int:
    """``replay --twice``: each cassette replayed twice, the first difference reported."""
    from hermes_replay._corpus.twice import replay_corpus_twice

    try:
        reports, where = replay_corpus_twice(
            target, out, options,
            started=lambda c: print(f"replaying {c} twice …", file=sys.stderr),
            done=lambda report: print("\n".join(report.lines())))
    except CorpusError as exc:
        print(f"hermes-replay replay: {sanitize(str(exc))}", file=sys.stderr)
        return exc.exit_code
    differ = sum(not r.deterministic for r in reports)
    print(f"{len(reports) - differ} of {len(reports)} cassette(s) replay the same twice; "
          f"outputs: {where}")
    return 1 if differ else 0


def final_table(rows: list[tuple[str, str, RunSummary]], style: Style) -> str:
    """One line per cassette: its counts and its status (``_corpus.summary.status``)."""
    colors = {"skip": "yellow", "ERROR": "red", "MISS": "red", "CHANGED": "yellow",
              "ok": "green"}
    body = []
    for cassette, mode, s in rows:
        word = status(s)
        body.append([cassette, mode, s.rollouts, s.turns, s.misses, s.unused,
                     fmt_reward(s.mean_reward), len(s.changed), style(word, colors[word])])
    headers = ["cassette", "mode", "rollouts", "turns", "misses", "unused", "mean reward",
               "changed", "status"]
    align = "llrrrrrrl"
    if any(s.rescore for _, _, s in rows):  # --rescore K: the judge's spread per cassette
        headers.insert(-1, "judge stdev")
        align = align[:-1] + "rl"
        for line, (_, _, s) in zip(body, rows, strict=True):
            spreads = [v["stdev"] for v in s.rescore.values() if v.get("stdev") is not None]
            line.insert(-1, fmt_reward(sum(spreads) / len(spreads)) if spreads else "-")
    return table(headers, body, align=align, style=style)
