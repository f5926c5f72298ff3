"""``hermes-replay compact CASSETTE [-o OUT]`` — store every shared string once; ``-o X.zst``
also compresses. See :mod:`hermes_replay._cassette.compact` for what is deduplicated and why it is
not
the default."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compact",
        help="rewrite a large cassette with shared strings stored once (and optionally zstd)",
        description="Rewrite a cassette so that every string it holds more than once (replies "
        "repeated in the next request, shared prompts and tool output) is stored once. The "
        "interactions are unchanged: replay, ls, show and diff see the same cassette. An "
        "output name ending in .zst is written zstd-compressed.",
        epilog="examples:\n"
        "  hermes-replay compact cassettes/my_env/process.jsonl            # in place\n"
        "  hermes-replay compact big.jsonl -o big.jsonl.zst                # and compress\n"
        "exit codes: 0 written; 1 the cassette cannot be read (the reason is printed); "
        "2 usage errors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("cassette", metavar="CASSETTE", type=Path,
                   help="a cassette (.jsonl or .jsonl.zst)")
    p.add_argument("-o", "--output", type=Path, metavar="OUT",
                   help="write here instead of replacing CASSETTE (atomically) in place")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._cassette.compact import compact_cassette
    from hermes_replay._errors import HermesReplayError

    if not args.cassette.exists():
        print(f"hermes-replay compact: {args.cassette} does not exist. Next step: pass a "
              "cassette file.", file=sys.stderr)
        return 2
    try:
        result = compact_cassette(args.cassette, args.output)
    except HermesReplayError as exc:
        print(f"hermes-replay compact: {exc}", file=sys.stderr)
        return 1
    ratio = result.bytes_after / result.bytes_before if result.bytes_before else 1.0
    print(f"hermes-replay compact · {result.output}")
    print(f"  {result.interactions} interactions · {result.shared_strings} shared strings "
          f"stored once · {result.bytes_before:,} -> {result.bytes_after:,} bytes "
          f"({ratio:.1%})")
    return 0
