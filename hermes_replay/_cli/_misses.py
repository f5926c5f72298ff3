"""A miss report where the CLI user is: each miss's field diff by default (the first few, each
shortened, with the count of the rest; ``-v`` shows all in full), and a next step made of
commands that exist on the command line — not Python keyword arguments."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from hermes_replay._terminal.render import sanitize

__all__ = ["SHOWN_DIFF_LINES", "SHOWN_MISSES", "cli_miss_hint", "miss_report"]

SHOWN_MISSES = 3
SHOWN_DIFF_LINES = 14


def _header(cassette: Path) -> dict[str, Any]:
    """Line 1 of the cassette (the documented header), or {} if unreadable."""
    try:
        with cassette.open(encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def cli_miss_hint(cassette: Path | None) -> str:
    """The next step, as commands: re-record only what is missing (``record --missing-only``,
    the endpoint given again), or ignore / normalize a volatile field while replaying."""
    header = _header(cassette) if cassette is not None else {}
    env_file = header.get("env_file") or "ENV_FILE"
    command = [a for a in header.get("command") or ["process", "…"] if isinstance(a, str)]
    where = f" --cassette {shlex.quote(str(cassette))}" if cassette is not None else ""
    record = (f"hermes-replay record {shlex.quote(str(env_file))}{where} --missing-only "
              f"--endpoint URL --model NAME -- {shlex.join(command[:1])} …")
    return ("next step: if the change is intended, re-record only what is missing (the old "
            f"cassette stays until it succeeds):\n    {record}\n  if a field is volatile, "
            "ignore or normalize it while replaying:\n    hermes-replay replay … "
            "--ignore-path body.metadata --normalize '\\d{4}-\\d\\d-\\d\\d=<date>'")


def miss_report(error: Any, *, verbose: bool, hint: str) -> str:
    """``CassetteMiss`` as the CLI prints it."""
    misses = list(getattr(error, "misses", []))
    head = f"{len(misses)} request(s) had no matching recording"
    if getattr(error, "cassette", None):
        head += f" in {error.cassette}"
    shown = misses if verbose else misses[:SHOWN_MISSES]
    limit = None if verbose else SHOWN_DIFF_LINES
    lines = [head + ":"]
    lines += [sanitize(m.describe(max_diff_lines=limit)) for m in shown]
    if len(shown) < len(misses):
        rest = misses[len(shown):]
        where = ", ".join(f"{m.rollout or '<no rollout>'} turn {m.turn}" for m in rest[:8])
        more = " …" if len(rest) > 8 else ""
        lines.append(f"… and {len(rest)} more miss(es) ({sanitize(where)}{more}); -v shows "
                     "every diff in full")
    lines.append(hint)
    return "\n".join(lines)
