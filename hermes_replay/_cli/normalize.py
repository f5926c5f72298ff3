"""``hermes-replay normalize CASSETTE [--add N]… [--remove N]… [--list]`` — the normalizers a
cassette keeps in its header, applied by every replay of it with no flag.

``N`` is a built-in name (``datetime``, ``uuid``, ``tmp-path``, ``epoch``, ``hex-id``) or
``REGEX=REPLACEMENT``. Only line 1 changes; the recordings stay byte for byte, and their
fingerprints are recomputed on the next load (the header's matcher signature no longer fits).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._cli._runner import normalizer_arg


def register(sub: Any) -> None:
    from hermes_replay._cassette.normalizers import BUILTINS

    names = "\n".join(f"  {b.name:<9} {b.covers}" for b in BUILTINS.values())
    p = sub.add_parser(
        "normalize",
        help="list, add or remove the normalizers a cassette keeps (every replay applies them)",
        description="The normalizers a cassette keeps in its header rewrite volatile text "
        "(a date, a uuid, a temp path) in requests before matching, in every replay of it: "
        "the CLI, a folder, -j, the pytest plugin, run_cassette, --twice and check. With no "
        "--add/--remove, lists them.",
        epilog=f"built-in normalizers:\n{names}\n"
        "examples:\n"
        "  hermes-replay normalize cassettes/my_env/process.jsonl --add datetime\n"
        "  hermes-replay normalize cassettes/my_env/process.jsonl --add '\\bREQ-\\d+=<req>'\n"
        "exit codes: 0 done; 1 the cassette cannot be read or written; 2 usage errors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("cassette", metavar="CASSETTE", type=Path,
                   help="a cassette file (.jsonl or .jsonl.zst)")
    p.add_argument("--add", action="append", default=[], type=normalizer_arg,
                   metavar="NAME|REGEX=REPLACEMENT", help="keep this normalizer (repeatable)")
    p.add_argument("--remove", action="append", default=[], type=normalizer_arg,
                   metavar="NAME|REGEX=REPLACEMENT", help="stop keeping it (repeatable)")
    p.add_argument("--list", action="store_true", help="list them (the default)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._cassette.normalizers import as_header, describe, from_header, specs
    from hermes_replay._cassette.read import load_cassette
    from hermes_replay._cassette.write import rewrite_header
    from hermes_replay._errors import CassetteError

    path: Path = args.cassette
    if not path.is_file():
        print(f"hermes-replay normalize: {path} is not a cassette file"
              + (" (a folder: normalize the merged cassette, or each shard)"
                 if path.is_dir() else "") + ".", file=sys.stderr)
        return 2
    try:
        header = load_cassette(path).header
        current = from_header(header.normalizers)
    except (CassetteError, ValueError) as exc:
        print(f"hermes-replay normalize: {exc}", file=sys.stderr)
        return 1
    missing = [r for r in args.remove if r not in current]
    if missing:
        kept = ", ".join(describe(s).split("  ")[0] for s in current) or "none"
        print(f"hermes-replay normalize: {path} does not keep "
              f"{', '.join(describe(m) for m in missing)} (it keeps: {kept}).", file=sys.stderr)
        return 2
    wanted = specs([*(s for s in current if s not in args.remove), *args.add])
    if wanted != current:
        try:
            rewrite_header(path, header.model_copy(update={"normalizers": as_header(wanted)}))
        except OSError as exc:
            print(f"hermes-replay normalize: cannot write {path}: {exc.strerror or exc}; the "
                  "cassette is unchanged.", file=sys.stderr)
            return 1
    print(f"hermes-replay normalize · {path}")
    if not wanted:
        print("  no normalizers kept (add one with --add datetime, --add REGEX=REPLACEMENT)")
    for spec in wanted:
        change = " (added)" if spec not in current else ""
        print(f"  {describe(spec)}{change}")
    for spec in current:
        if spec not in wanted:
            print(f"  removed: {describe(spec)}")
    return 0
