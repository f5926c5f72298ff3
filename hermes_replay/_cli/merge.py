"""``hermes-replay merge SHARD... -o OUT`` — join the shards of workers that recorded at once.

Workers record with ``hermes-replay record … --shard NAME`` into ``<cassette>.shards/``; this
joins them into one cassette (see :mod:`hermes_replay._cassette.merge` for the rules).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "merge",
        help="join shards recorded by several workers at once into one cassette",
        description="Join cassette shards (files, or a <cassette>.shards folder) into one "
        "cassette. The shards must record the same env, endpoint type, model and tokenizer, "
        "and no rollout id may appear in two shards. Shards are never modified.",
        epilog="example: hermes-replay merge cassettes/my_env/process.jsonl.shards "
        "-o cassettes/my_env/process.jsonl\n"
        "exit codes: 0 merged; 1 shards that cannot be joined (the reason is printed); "
        "2 usage errors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shards", metavar="SHARD", type=Path, nargs="+",
                   help="shard files, or folders whose *.jsonl are shards")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                   help="the merged cassette to write (replaced atomically if it exists)")
    p.add_argument("--allow-partial", action="store_true",
                   help="also merge interrupted shards (.partial) with what they completed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._cassette.merge import expand_shards, merge_cassettes
    from hermes_replay._errors import HermesReplayError

    shards = expand_shards(args.shards)
    missing = [p for p in shards if not p.exists()]
    if not shards or missing:
        what = ", ".join(map(str, missing)) if missing else ", ".join(map(str, args.shards))
        print(f"hermes-replay merge: no shard at {what}. Next step: pass the shard files or "
              "the <cassette>.shards folder the workers recorded into.", file=sys.stderr)
        return 2
    try:
        result = merge_cassettes(shards, args.output, allow_partial=args.allow_partial)
    except HermesReplayError as exc:
        print(f"hermes-replay merge: {exc}", file=sys.stderr)
        return 1
    print(f"hermes-replay merge · {result.output}")
    print(f"  {len(result.shards)} shards · {result.rollouts} rollouts · "
          f"{result.interactions} interactions ({result.scopeless} outside rollouts)")
    for note in result.notes:
        print(f"  note: {note}")
    print(f"  next: replay it with: hermes-replay replay {result.output}")
    return 0
