"""``hermes-replay fork CASSETTE --rollout ID --turn K [endpoint flags]``: continue a recorded
rollout live from turn K (the work is ``hermes_replay.fork_rollout``, room ``_fork``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._cli._provider import ProviderError, add_endpoint_args, options_text

USAGE = ("hermes-replay fork CASSETTE --rollout ID --turn K [--samples N] "
         "[--replace-message K=TEXT|K=@FILE] [--strict] [--branch PATH] --endpoint URL "
         "[--model NAME] [--server-type T] [--api-key-env VAR]")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fork", usage=USAGE, help="continue a recorded rollout live from turn K (a branch)",
        description="Replay turns 1..K-1 of a recorded rollout from the cassette, rebuild its "
        "sandbox by re-running the recorded tool calls before K in a fresh bubblewrap sandbox "
        "(drift reported per call), continue the agent loop live from turn K, run the reward "
        "live, and write a branch cassette whose header names its parent. Every other rollout "
        "of the run replays from the parent. The endpoint is never assumed.",
        epilog="exit codes: 0 forked; 1 the rollout cannot be forked there (the reason and the "
        "next step are printed) or the run failed; 2 usage errors")
    p.add_argument("cassette", type=Path, metavar="CASSETTE")
    p.add_argument("--rollout", required=True, metavar="ID", help="the rollout to fork")
    p.add_argument("--turn", required=True, type=int, metavar="K",
                   help="the first turn answered live (turns count from 1)")
    p.add_argument("--samples", type=int, default=1, metavar="N",
                   help="continue N times from the same prefix and show the reward spread")
    p.add_argument("--replace-message", metavar="K=TEXT",
                   help="what the model sees as the last tool result at turn K (K=@FILE reads "
                   "it from a file): 'what if the tool had answered X'")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first re-run tool call whose result drifted")
    p.add_argument("--branch", type=Path, metavar="PATH",
                   help="where to write (default: beside the parent, "
                   "<stem>.fork-<rollout>-t<K>.jsonl; -sN per sample)")
    add_endpoint_args(p)
    p.set_defaults(func=run)


def _replacement(text: str | None) -> tuple[int, str] | None:
    if text is None:
        return None
    turn, sep, value = text.partition("=")
    if not sep or not turn.strip().isdigit():
        raise ProviderError(f"--replace-message {text!r}: write K=TEXT or K=@FILE")
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ProviderError(f"--replace-message: cannot read {value[1:]}: "
                                f"{exc.strerror or exc}") from None
    return int(turn), value


def run(args: argparse.Namespace) -> int:
    from hermes_replay import ForkError, HermesReplayError, fork_rollout

    if not args.endpoint:
        print(f"hermes-replay fork: no inference endpoint given; the live turns need one and "
              f"hermes-replay never picks a provider. Add its flags:\n{options_text()}",
              file=sys.stderr)
        return 2
    try:
        replace = _replacement(args.replace_message)
        result = fork_rollout(
            args.cassette, args.rollout, args.turn, base_url=args.endpoint, model=args.model,
            server_type=args.server_type or "openai", api_key_env=args.api_key_env,
            samples=args.samples, replace=replace, strict=args.strict, branch=args.branch,
            first_answer_timeout=args.first_answer_timeout)
    except (ProviderError, ValueError) as exc:
        print(f"hermes-replay fork: {exc}", file=sys.stderr)
        return 2
    except ForkError as exc:
        print(f"hermes-replay fork: {exc}", file=sys.stderr)
        return 1
    except HermesReplayError as exc:
        print(f"hermes-replay fork: {exc}", file=sys.stderr)
        return 1
    print(f"hermes-replay fork · {result.parent} · rollout {result.rollout} at turn "
          f"{result.turn} (parent reward {_num(result.parent_reward)})")
    for b in result.branches:
        print(f"  {b.path}: reward {_num(b.reward)} · {b.turns} turns · {b.rebuilt} recorded "
              f"tool call(s) re-run to rebuild the sandbox · "
              f"{len(b.drift) or 'no'} drift")
        for line in b.drift:
            print(f"    drift: {line}")
    spread = result.spread()
    if len(result.branches) > 1 and spread:
        print(f"  reward over {len(result.branches)} samples: mean {spread['mean']:.3f} ± "
              f"{spread['stdev']:.3f} [{spread['min']:.3f}–{spread['max']:.3f}]")
    first = result.branches[0].path
    print(f"  next: hermes-replay show {first} · hermes-replay diff {result.parent} {first}")
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
