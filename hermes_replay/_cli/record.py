"""``hermes-replay record ENV_FILE [--cassette PATH] [endpoint flags] -- MODE [env flags]``.

Runs the environment's own CLI live, in this process, and writes its LLM traffic to a
cassette. The endpoint is never assumed (see ``_provider``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import textwrap
from functools import partial
from pathlib import Path
from typing import Any

from hermes_replay._cli._provider import (
    Endpoint,
    ProviderError,
    add_endpoint_args,
    ask_endpoint,
    endpoint_from_args,
    no_endpoint_message,
)
from hermes_replay._cli._runner import (
    ENV_HELP,
    add_env_command,
    add_normalize_flag,
    add_verbose_flag,
    check_env_args,
    default_cassette_path,
    env_log_path,
    redact_command,
    run_with_progress,
)
from hermes_replay._cli._worker import add_worker_flag, given_worker, worker_variable
from hermes_replay._runner.env_target import check_env_file, resolve_env
from hermes_replay._terminal.render import Style
from hermes_replay._world.rescore import WORKSPACE_LIMIT_VAR

USAGE = (
    "hermes-replay record ENV_FILE [--cassette PATH] [--missing-only] [--shard NAME|auto] "
    "[--worker NAME] [--normalize NAME|RE=S] [--endpoint URL --model NAME [--server-type T] "
    "[--api-key-env VAR]] [-v] -- serve|process|evaluate [env flags]"
)


def register(sub: Any) -> None:
    p = add_env_command(
        sub,
        "record",
        help="run an environment live and record its LLM traffic to a cassette",
        usage=USAGE,
        description=textwrap.fill(
            "Run ENV_FILE's own CLI (serve, process or evaluate) in this process against a real "
            "endpoint and write every LLM request/response to a cassette. The endpoint is never "
            "assumed: give --endpoint/--model, or --openai.base_url after `--`; otherwise a "
            "terminal is asked and a non-interactive run stops with the options."
        ),
        epilog=(
            "example: hermes-replay record environments/my_env.py --endpoint "
            "http://localhost:8000/v1 --model my-model --server-type vllm -- process "
            "--env.total_steps 2 --env.group_size 4\n"
            "exit codes: 0 recorded; 1 the environment failed or nothing was recorded (the "
            "previous cassette is kept); 2 usage errors, or no endpoint and no terminal to ask"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("env_file", metavar="ENV_FILE", help=ENV_HELP)
    p.add_argument(
        "--cassette",
        type=Path,
        metavar="PATH",
        help="where to write (default: cassettes/<env file stem>/<mode>.jsonl)",
    )
    p.add_argument(
        "--missing-only",
        action="store_true",
        help="replay what the cassette has and record only the requests it is missing (mode "
        "auto); the old cassette stays until the run succeeds, and the summary names what was "
        "re-recorded",
    )
    p.add_argument(
        "--shard",
        metavar="NAME",
        help="one of several workers recording at once: write <cassette>.shards/NAME.jsonl "
        "(no locking; join them with `hermes-replay merge`). 'auto' = the worker's identity "
        "(--worker, or in serve its registration order: w0, w1 …), else <host>-<pid>",
    )
    add_worker_flag(p)
    add_verbose_flag(p)
    p.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed Python's random and numpy with N before the environment starts (default: a "
        "new seed); the header keeps it and replay seeds the same",
    )
    p.add_argument(
        "--workspace-limit", metavar="BYTES", type=_size,
        help="bytes of each rollout's sandbox workspace kept when its reward starts (default "
        "8M; K/M/G suffixes; 0 keeps none): what a changed reward is re-scored against offline",
    )
    add_normalize_flag(p, help="keep a normalizer with the cassette (in its header; every "
                       "replay applies it): a built-in name (datetime, uuid, tmp-path, epoch, "
                       "hex-id) or REGEX=REPLACEMENT (repeatable). The summary proposes the "
                       "built-ins the recorded requests need")
    add_endpoint_args(p)
    p.set_defaults(func=run)


def resolve_endpoint(args: argparse.Namespace, env_args: list[str]) -> Endpoint:
    """The endpoint from flags, else asked on a terminal; ProviderError when neither works."""
    endpoint = endpoint_from_args(
        endpoint=args.endpoint,
        model=args.model,
        server_type=args.server_type,
        api_key_env=args.api_key_env,
        env_args=env_args,
    )
    if endpoint is not None:
        return endpoint
    if not _stdin_is_tty():
        raise ProviderError(no_endpoint_message("hermes-replay record", args.env_file, env_args))
    chosen = ask_endpoint(sys.stdin, sys.stderr, env_mode=env_args[0])
    again = " ".join([*chosen.record_flags()])
    print(
        f"Next time, skip this question with: hermes-replay record {args.env_file} {again} "
        f"-- {' '.join(env_args)}",
        file=sys.stderr,
    )
    return chosen


def _stdin_is_tty() -> bool:
    try:
        return bool(sys.stdin and sys.stdin.isatty())
    except (AttributeError, ValueError):
        return False


def prepare_live_run(prog: str, args: argparse.Namespace) -> tuple[list[str], Any, list[str]] | int:
    """Validate ENV_FILE and the env argv, and settle the endpoint (asking on a terminal).

    Returns ``(env_args, endpoint, secret_flags)``, or the exit code when the run must not go
    ahead. Shared by ``record`` and ``passthrough``, the two commands that reach an endpoint.
    """
    problem = check_env_file(prog, args.env_file) or check_env_args(
        prog, args.env_file, args.env_args
    )
    if problem:
        print(problem, file=sys.stderr)
        return 2
    env_args: list[str] = list(args.env_args)
    try:
        endpoint = resolve_endpoint(args, env_args)
        secret = endpoint.secret_flags(os.environ)
    except KeyboardInterrupt:
        print(f"\nhermes-replay {prog}: cancelled; nothing was run.", file=sys.stderr)
        return 130
    except ProviderError as exc:
        msg = str(exc).replace("hermes-replay record", f"hermes-replay {prog}")
        print(msg if msg.startswith("hermes-replay") else f"hermes-replay {prog}: {msg}",
              file=sys.stderr)
        return 2
    return env_args, endpoint, secret


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    scale = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 8M, 512K, 0)")
    return int(number) * scale


def run(args: argparse.Namespace) -> int:
    if getattr(args, "workspace_limit", None) is not None:  # read by every session of the run
        os.environ[WORKSPACE_LIMIT_VAR] = str(args.workspace_limit)
    prepared = prepare_live_run("record", args)
    if isinstance(prepared, int):
        return prepared
    env_args, endpoint, secret = prepared

    env_file, module = resolve_env("record", args.env_file)  # type: ignore[misc]
    public = [*env_args, *endpoint.env_flags()]
    cassette = args.cassette or default_cassette_path(env_file, env_args[0])
    merged = cassette
    worker = given_worker("record", args)
    if isinstance(worker, int):
        return worker
    shard = args.shard or (worker if args.worker else None)  # --worker alone: its own shard
    if shard == "auto" and worker is not None:
        shard = worker
    if shard:
        from hermes_replay._cassette.merge import shard_path

        try:
            cassette = shard_path(cassette, shard)
        except ValueError as exc:
            print(f"hermes-replay record: {exc}", file=sys.stderr)
            return 2
    from hermes_replay._runner.plan import project_root, recorded_env_fields
    from hermes_replay._runner.portable import portable_command

    header: dict[str, Any] = {
        **recorded_env_fields(env_file, module[0] if module else None),
        "command": redact_command(portable_command(public, Path.cwd().resolve(),
                                                   project_root(env_file.parent))),
        **endpoint.header_fields(),
    }
    if header["env_file"].startswith("../") or Path(header["env_file"]).is_absolute():
        print(f"hermes-replay record: warning: {env_file} is outside the current directory; "
              "`hermes-replay replay` of a folder only runs env files inside the project, so "
              "record from the project root.", file=sys.stderr)
    redact_command([*public, *secret])  # the key and URL passwords become known secrets
    from hermes_replay._runner.trust import trust_recorded

    if note := trust_recorded(env_file, header["env_file"]):  # the project it runs
        print(f"hermes-replay record: {note}", file=sys.stderr)
    where = redact_command([endpoint.base_url])[0] if endpoint.base_url else \
        "the env's configured endpoint"
    replaces = " (replaces it only if the run succeeds)" if cassette.exists() else ""
    mode = "auto" if args.missing_only else "record"
    what = "only what is missing from" if mode == "auto" and cassette.exists() else "->"
    log = None if args.verbose else env_log_path("record", env_file, env_args[0])
    print(f"hermes-replay record: {env_file} {env_args[0]} against {where} {what} {cassette}"
          f"{replaces}", file=sys.stderr)
    if log is not None:
        print(f"  environment output: {log} (-v shows it here)", file=sys.stderr)
    run_args = [*public, *secret, *_groups_outside_the_project(env_args, env_file, log)]
    from hermes_replay._runner.run import run_env

    with worker_variable(worker):
        summary, result = run_with_progress(
            partial(run_env, env_file, run_args, cassette=cassette, mode=mode,
                    module=module,
                    header=header, seed=args.seed, worker=worker,
                    first_answer_timeout=args.first_answer_timeout,
                    shard_by_worker=shard == "auto",
                    **({"normalizers": list(args.normalize)} if args.normalize else {}),
                    **({"drop_unrun": True} if mode == "auto" else {})),
            mode=mode, cassette=cassette, label=f"recording {env_file.name}", log_path=log,
            verbose=args.verbose)
    if result is not None and result.summary is not None:  # renamed after its worker?
        summary.cassette = result.summary.cassette
        cassette = Path(result.summary.cassette)
    style = Style(sys.stdout)
    print("\n".join(summary.lines(style)))
    if summary.error is None and summary.exit_code == 0:
        proposals = proposal_lines(cassette) if merged == cassette else []  # not per shard
        if proposals:
            print("\n".join(proposals))
        if merged != cassette:
            print(f"  next: when every worker is done: hermes-replay merge {cassette.parent} "
                  f"-o {merged}")
        else:
            print(f"  next: replay it offline with: hermes-replay replay {cassette}")
        return 0
    return summary.exit_code or 1


def _groups_outside_the_project(env_args: list[str], env_file: Path,
                                log: Path | None) -> list[str]:
    from hermes_replay._runner.log_folder import groups_beside_log

    flags = groups_beside_log(env_args, env_file, log)
    if flags:
        print(f"  scored groups (atroposlib's process output): {flags[1]} (pass "
              "--env.data_path_to_save_groups PATH to keep them elsewhere)", file=sys.stderr)
    return flags


def proposal_lines(written: Path) -> list[str]:
    """What ``record`` says about volatile values it saw in the requests: which built-in
    normalizer to keep with the cassette, and the command that keeps it (none: nothing)."""
    from hermes_replay._cassette.matching import Matcher
    from hermes_replay._cassette.normalizers import expand, from_header, item_text, propose
    from hermes_replay._cassette.read import load_cassette
    from hermes_replay._errors import CassetteError
    from hermes_replay._terminal.render import sanitize

    try:
        recorded = load_cassette(written)
        have = from_header(recorded.header.normalizers)
    except (CassetteError, ValueError, OSError):
        return []
    # a plain env's group keeps its item: its own values (dataset text) are never volatile
    items = {rid: item_text(rec.outcome["item"]) for rid, rec in recorded.rollouts.items()
             if isinstance((rec.outcome or {}).get("item"), str)}
    found = propose(recorded.interactions, Matcher.build(normalizers=expand(have)).canonical,
                    have, items)
    if not found:
        return []
    out = ["  volatile values in the requests the environment built (a replay on another day "
           "or machine would miss on them):"]
    out += [sanitize(f"    {p.name:<9} {p.example} in {p.where()}") for p in found]
    adds = " ".join(f"--add {p.name}" for p in found)
    out += ["  keep the normalizers with the cassette (every replay then applies them):",
            f"    hermes-replay normalize {shlex.quote(str(written))} {adds}",
            "  (or record with " + " ".join(f"--normalize {p.name}" for p in found) + ")"]
    return out
