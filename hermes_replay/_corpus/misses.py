"""A miss report where the CLI user is: each miss's field diff by default (the first few, each
shortened, with the count of the rest; ``-v`` shows all in full), and a next step made of
commands that exist on the command line — not Python keyword arguments."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from hermes_replay._terminal.render import sanitize

__all__ = ["SHOWN_MISSES", "cli_miss_hint", "miss_report", "volatile_parts"]

SHOWN_MISSES = 3


def _header(cassette: Path) -> dict[str, Any]:
    """Line 1 of the cassette (the documented header), or {} if unreadable."""
    try:
        with cassette.open(encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def _endpoint_flags(header: dict[str, Any]) -> str:
    """The endpoint the cassette was recorded against, as ``record`` flags (placeholders
    where the header says nothing): the user re-records against the same one."""
    from hermes_replay._terminal.render import sanitize

    def given(key: str, placeholder: str) -> str:
        value = header.get(key)
        if not isinstance(value, str) or not value or len(value) > 500:
            return placeholder
        return shlex.quote(sanitize(value))

    flags = f" --endpoint {given('base_url', 'URL')} --model {given('model', 'NAME')}"
    kind = header.get("endpoint_type")
    if kind in ("openai", "vllm", "sglang"):
        flags += f" --server-type {kind}"
    return flags


def cli_miss_hint(cassette: Path | None, misses: list[Any] | None = None,
                  normalizers: list[Any] | None = None) -> str:
    """The next step, as commands: keep the built-in normalizer a miss would match with (the
    diagnosis found one), re-record only what is missing (``record --missing-only``, the
    endpoint and the flags' normalizers given again), or ignore a volatile field."""
    from hermes_replay._cassette.normalizers import as_header

    header = _header(cassette) if cassette is not None else {}
    env_file = header.get("env_file") or "ENV_FILE"
    command = [a for a in header.get("command") or ["process", "…"] if isinstance(a, str)]
    where = f" --cassette {shlex.quote(str(cassette))}" if cassette is not None else ""
    given = "".join(f" --normalize {shlex.quote(n if isinstance(n, str) else f'{n[0]}={n[1]}')}"
                    for n in as_header(list(normalizers or [])))
    extra = header.get("extra") if isinstance(header.get("extra"), dict) else {}
    module = extra.get("env_module")
    env = f"-m {shlex.quote(module)}" if isinstance(module, str) and module else \
        shlex.quote(str(env_file))
    record = (f"hermes-replay record {env}{where} --missing-only{given}"
              f"{_endpoint_flags(header)} -- {shlex.join(command[:1])} …")
    target = shlex.quote(str(cassette)) if cassette is not None else "CASSETTE"
    fixes = list(dict.fromkeys(n for m in misses or [] if getattr(m, "normalizer", None)
                               for n in m.normalizer.split(" + ")))
    lines = ["next step:"]
    if fixes:
        adds = " ".join(f"--add {n}" for n in fixes)
        lines.append(f"  the requests match their recordings once {' and '.join(fixes)} values "
                     "are normalized; keep that with the cassette (every replay then applies "
                     f"it):\n    hermes-replay normalize {target} {adds}")
    lines.append("  if the change is intended, re-record only what is missing (the old "
                 f"cassette stays until it succeeds):\n    {record}")
    if not fixes:
        lines += _volatile_hints(misses or [], target)
    return "\n".join(lines)


# where a model reads the conversation: a change there is content, never a field to ignore
_CONTENT = ("body.messages", "body.prompt", "body.input", "body.tools", "body.input_ids",
            "body.text")


def volatile_parts(misses: list[Any]) -> tuple[list[str], list[str]]:
    """(the built-in normalizers whose volatile-looking values the diffs changed — a date, a
    uuid, a temp path …; the differing fields outside the conversation): what a next step may
    offer to keep or ignore. Both are empty for a changed prompt, which is content."""
    import re

    from hermes_replay._cassette.matching import _field_of
    from hermes_replay._cassette.normalizers import BUILTINS

    changed = [line[1:] for m in misses for line in (getattr(m, "diff", "") or "").splitlines()
               if line[:1] in "-+" and not line.startswith(("---", "+++"))]
    names = [name for name, builtin in BUILTINS.items()
             if any(re.search(pattern, line) for pattern, _ in builtin.rewrites
                    for line in changed)]
    fields = list(dict.fromkeys(
        field for line in changed if (field := _field_of(line)).startswith("body.")
        and not field.startswith(_CONTENT)))
    return names, fields


def _volatile_hints(misses: list[Any], target: str) -> list[str]:
    """A normalizer for the volatile-looking values the diffs changed, and ``--ignore-path``
    for differing fields outside the conversation — each only when the diffs hold such a
    value or field (``volatile_parts``): a changed system prompt gets neither."""
    names, fields = volatile_parts(misses)
    out: list[str] = []
    if names:
        adds = " ".join(f"--add {n}" for n in names)
        out.append(f"  if the {' / '.join(names)} values that differ are volatile, keep a "
                   f"normalizer with the cassette:\n    hermes-replay normalize {target} {adds}")
    if fields:
        shown = " ".join(f"--ignore-path {f}" for f in fields[:3])
        out.append(f"  if {', '.join(fields[:3])} is volatile, ignore it while replaying:\n"
                   f"    hermes-replay replay … {shown}")
    return out


def miss_report(error: Any, *, verbose: bool, hint: str) -> str:
    """``CassetteMiss`` as the CLI prints it: the first few misses that are causes, each with
    its first three diverging fields (``-v``: every miss and field), then the misses that
    follow from them, one line each."""
    from hermes_replay._errors import miss_text

    misses = list(getattr(error, "misses", []))
    text = miss_text(misses, getattr(error, "cassette", None), hint, verbose=verbose,
                     shown=None if verbose else SHOWN_MISSES,
                     more="; -v shows every diff in full")
    return sanitize(text)
