"""``hermes-replay watch [PATH]`` — replay the affected cassettes on every save, in about a second.

The loop of an environment author: change ``compute_reward``, see which rollout's reward moved.
A cold ``hermes-replay replay`` spends most of its 4–5 s importing atroposlib's stack; here
one warm process imports it once (``_runner.warm``), and each save's replays run in workers
forked from it, so each save starts clean and every cassette imports the user's own modules
fresh from disk. PATH is a folder of
cassettes (default ``./cassettes``), one cassette, or an env file (the cassettes recorded
with it).

What is watched: the project's Python files and cassettes (see ``_watch_plan``), through
watchfiles — inotify on Linux, FSEvents/kqueue elsewhere, and polling with ``--poll`` (or
``WATCHFILES_FORCE_POLLING=1``) for network and container mounts where file events do not
arrive. Why watchfiles: it is already in atroposlib's dependency tree (uvicorn's ``standard``
extra), it groups the several events of one save (``step``) and it stops on Ctrl-C by itself;
watchdog would be a new dependency for the same events.

Every run prints one verdict per cassette as it finishes (``_watch_run.verdict_lines``) and a
closing line with the time since the save was seen. A saved file that does not compile is shown
(file:line and caret) and nothing is replayed until the next save. Ctrl-C ends the runs, the
warm process and the watch (exit 0).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hermes_replay._cli._runner import add_tool_policy_args, tool_options
from hermes_replay._corpus.watch import Watcher
from hermes_replay._terminal.render import Style

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="replay the affected cassettes on every save (a warm process: about a second)",
        usage="hermes-replay watch [PATH] [-j N] [--out DIR] [--poll] [--tools replay|execute]",
        description=(
            "Watch the project's Python files and cassettes; on every save replay the "
            "cassettes it affects, forked from one process that imported the environment "
            "stack once, and print per cassette: ok, the rewards that moved (recorded -> now), "
            "or the misses with their diff. PATH: a folder of cassettes (default ./cassettes), "
            "a cassette, or an env file (its cassettes). Ctrl-C stops."),
        epilog="exit codes: 0 stopped with Ctrl-C; 2 nothing to watch or a usage error",
    )
    p.add_argument("path", nargs="?", default="cassettes", metavar="PATH",
                   help="a folder of cassettes (default ./cassettes), a cassette or an env file")
    p.add_argument("-j", "--jobs", type=int, metavar="N",
                   help="replay up to N cassettes at once (default: the number of cores)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where each cassette's latest outputs and env.log go (default: a "
                   "temporary folder, removed when the watch stops)")
    p.add_argument("--poll", action="store_true",
                   help="poll for changes instead of file events (network or container "
                   "mounts where events do not arrive)")
    add_tool_policy_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._corpus.processes import default_jobs
    from hermes_replay._corpus.watch_plan import WatchPlan
    from hermes_replay._runner.env_target import module_as_file

    target = Path(module_as_file(str(args.path)))
    if not target.exists():
        print(f"hermes-replay watch: {target} does not exist. Next step: pass a folder of "
              "cassettes (default ./cassettes), a cassette or an env file.", file=sys.stderr)
        return 2
    try:
        from hermes_replay._runner.options import RunOptions

        tools = RunOptions.of(where="hermes-replay watch", **tool_options(args))
    except ValueError as exc:
        print(f"hermes-replay watch: {exc}", file=sys.stderr)
        return 2
    plan = WatchPlan.from_target(target)
    if not plan.cassettes:
        print(f"hermes-replay watch: no cassette to replay for {target}. Next step: record "
              "one with hermes-replay record ENV_FILE --endpoint URL --model NAME -- process",
              file=sys.stderr)
        return 2
    jobs = args.jobs or default_jobs()
    out = args.out.resolve() if args.out else Path(tempfile.mkdtemp(prefix="hermes-replay-watch-"))
    watcher = Watcher(plan, out, jobs, tools, poll=args.poll, style=Style(sys.stdout))
    try:
        watcher.loop()
    except KeyboardInterrupt:
        print("\nhermes-replay watch: stopped.", flush=True)
    finally:
        watcher.close()
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0
