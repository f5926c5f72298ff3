"""``replay --llm live=PATTERN --live-base-url URL [--live-api-key-env VAR] [--rescore K]``:
re-score a recorded run with a live judge.

The flags are parsed and checked here (a combination that cannot work is a usage error before
anything runs); the work is the session's (``_session.live_calls``) and the corpus'
(``_corpus.rescore``: K runs folded into the cassette's row).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from hermes_replay._session.live_calls import DEFAULT_CALL_TIMEOUT, PATTERN_HELP, LiveCalls

__all__ = ["add_live_args", "live_options", "refused_with"]


def add_live_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("re-scoring with a live judge (the policy's calls still replay)")
    g.add_argument(
        "--llm", action="append", default=[], metavar="live=PATTERN",
        help=f"send the LLM calls PATTERN selects to --live-base-url instead of answering "
        f"them from the cassette (repeatable); PATTERN is {PATTERN_HELP}; what they answer "
        "goes into a new cassette <out>/<cassette>.rescored.jsonl")
    g.add_argument(
        "--live-base-url", metavar="URL",
        help="the endpoint live calls go to (an OpenAI-compatible base URL, e.g. "
        "http://127.0.0.1:8000/v1); never the address the cassette recorded")
    g.add_argument(
        "--live-api-key-env", metavar="VAR",
        help="the environment variable holding that endpoint's key (sent as a Bearer token; "
        "never written anywhere)")
    g.add_argument(
        "--live-timeout", type=float, metavar="SECONDS",
        help="the most one live call may take, from sending it to the end of its answer "
        f"(default {DEFAULT_CALL_TIMEOUT:g}); a judge that stays silent longer fails the run")
    g.add_argument(
        "--rescore", type=int, metavar="K",
        help="replay each cassette K times with the live calls and report, per rollout, the "
        "recorded reward beside the mean and spread of the K new ones (judge variance)")


def live_options(args: argparse.Namespace) -> dict[str, Any]:
    """``{"live": spec, "rescore": K}`` from the flags (``{}`` when none is given); ValueError
    says what does not go together and what to write instead."""
    given = [item for item in (getattr(args, "llm", None) or [])]
    base_url = getattr(args, "live_base_url", None)
    key_env = getattr(args, "live_api_key_env", None)
    rescore = getattr(args, "rescore", None)
    timeout = getattr(args, "live_timeout", None)
    if not given:
        extra = [flag for flag, value in (("--live-base-url", base_url),
                                          ("--live-api-key-env", key_env),
                                          ("--live-timeout", timeout),
                                          ("--rescore", rescore)) if value is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)} go(es) with --llm live=PATTERN (which calls "
                             "to send live), e.g. --llm live=reward")
        return {}
    patterns = []
    for item in given:
        word, sep, pattern = item.partition("=")
        if word.strip() != "live" or not sep or not pattern.strip():
            raise ValueError(f"--llm {item!r}: write --llm live=PATTERN, PATTERN being "
                             f"{PATTERN_HELP}")
        patterns.append(pattern)
    if not base_url:
        raise ValueError("--llm live=… needs --live-base-url URL: the endpoint the live calls "
                         "go to (never the one the cassette recorded, which is untrusted "
                         "input)")
    if rescore is not None and rescore < 1:
        raise ValueError(f"--rescore {rescore}: give 1 or more runs per cassette")
    spec: dict[str, Any] = {"patterns": patterns, "base_url": base_url, "api_key_env": key_env}
    if timeout is not None:
        spec["call_timeout"] = timeout
    LiveCalls.build(spec, os.environ)  # every mistake now, before anything runs
    options: dict[str, Any] = {"live": spec}
    if rescore is not None:
        options["rescore"] = rescore
    return options


def refused_with(args: argparse.Namespace) -> str | None:
    """Why the other flags given cannot go with live calls, or None."""
    if getattr(args, "env_args", None) is not None:
        return ("--llm live=… re-scores cassettes into an --out folder: give the cassette or "
                "folder (hermes-replay replay CASSETTE_OR_DIR --llm live=…), not ENV_FILE -- MODE")
    if getattr(args, "executor", "local") == "ray":
        return ("--llm live=… runs with --executor local only (-j N processes): the live "
                "key would have to travel to the Ray workers; run the shards with -j instead")
    if getattr(args, "twice", False):
        return ("--twice compares two offline replays; with live calls the judge's answers "
                "may differ on purpose — use --rescore K to measure that")
    if getattr(args, "tools", "replay") != "replay" or any(
            item.partition("=")[2] == "execute" for item in getattr(args, "tool", None) or []):
        return ("--llm live=… re-scores with the recorded tool results: drop --tools "
                "execute / --tool NAME=execute")
    return None
