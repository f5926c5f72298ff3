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
    from hermes_replay._cassette.normalizers import BUILTINS, parse_kept

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
        "  (an '=' of the regex or the replacement is written \\=: 'id\\=\\d+=id\\=<n>')\n"
        "exit codes: 0 done; 1 the cassette cannot be read or written; 2 usage errors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("cassette", metavar="CASSETTE", type=Path,
                   help="a cassette file (.jsonl or .jsonl.zst)")
    p.add_argument("--add", action="append", default=[], type=normalizer_arg,
                   metavar="NAME|REGEX=REPLACEMENT", help="keep this normalizer (repeatable)")
    # not checked: a normalizer that replay refuses must still be removable
    p.add_argument("--remove", action="append", default=[], type=parse_kept,
                   metavar="NAME|REGEX=REPLACEMENT", help="stop keeping it (repeatable)")
    p.add_argument("--list", action="store_true", help="list them (the default)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._cassette.normalizers import as_header, describe, specs
    from hermes_replay._cassette.normalizers import displayed as _shown
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
    except CassetteError as exc:
        print(f"hermes-replay normalize: {exc}", file=sys.stderr)
        return 1
    raw = header.normalizers if isinstance(header.normalizers, list) else []
    missing = [r for r in args.remove if r not in raw]
    if missing:
        kept = ", ".join(_shown(s) for s in raw) or "none"
        print(f"hermes-replay normalize: {path} does not keep "
              f"{', '.join(map(_shown, missing))} (it keeps: {kept}).", file=sys.stderr)
        return 2
    removed = [s for s in raw if s in args.remove]
    try:  # what is left must pass the check replay makes (``--remove`` a bad one first)
        current = specs(s for s in raw if s not in args.remove)
        wanted = specs([*current, *args.add])
    except ValueError as exc:
        print(f"hermes-replay normalize: {path}:1: {exc}. Next step: remove it with "
              "--remove NAME|REGEX=REPLACEMENT (--list shows them).", file=sys.stderr)
        return 1
    if wanted != current or removed:
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
    for item in removed:
        print(f"  removed: {_shown(item)}")
    return 0
