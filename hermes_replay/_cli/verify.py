"""``hermes-replay verify PATH...`` — schema, integrity and secrets of cassettes, for CI.

Prints one line per finding (``file:line: kind: what``) with the next step, then a summary;
exits 1 if anything was found, 2 if nothing could be verified (no such path, no cassette).
Found secrets are shown masked (first characters and length), never whole.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_replay._terminal.render import Style


def register(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="check cassettes: schema, integrity, and no secrets (exit 1 on a finding)",
        description="Check each cassette (a file, or every cassette under a folder): every "
        "record parses and has the right fields, references and checksums resolve, turn "
        "numbers are consistent, and no API key, token or credential is stored.",
    )
    p.add_argument("paths", metavar="PATH", type=Path, nargs="*", default=[Path("cassettes")],
                   help="cassette files or folders (default: ./cassettes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hermes_replay._cassette.verify import verify_paths

    style = Style(sys.stdout)
    checked, findings = verify_paths(args.paths)
    from hermes_replay._cassette.verify import Finding
    from hermes_replay._world.audit import audit_stores

    for blob, message in audit_stores(checked):  # the recorded workspaces beside them
        findings.append(Finding(blob, None, "secret", message,
                                "re-record the rollouts that use it (the recorder scrubs "
                                "workspaces); delete the blob from the store"))
    for finding in findings:
        text = finding.describe()
        head, _, rest = text.partition("\n")
        text = style(head, "red") + ("\n" + rest if rest else "")
        print(text)
    if not checked and not findings:
        print(f"hermes-replay verify: no cassette found in {', '.join(map(str, args.paths))}; "
              "pass a cassette file or a folder that holds them", file=sys.stderr)
        return 2
    kinds: dict[str, int] = {}
    for finding in findings:
        kinds[finding.kind] = kinds.get(finding.kind, 0) + 1
    detail = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    print(f"verified {len(checked)} cassette(s): {len(findings)} finding(s)"
          + (f" ({detail})" if detail else ""))
    if not checked:
        return 2
    return 1 if findings else 0
