"""``groups.html`` for ``process`` runs, in memory bounded by what the page shows.

atroposlib's ``process_manager`` ends with ``generate_html(groups.jsonl)``, which parses each
whole group line — token ids, masks and logprobs included, one Python int per number — and
runs every message through Python-Markdown whole. For a 10 MB model reply that was about
190 MB for the parse plus several 10 MB copies in Markdown, the peak of the whole run.

The page needs only ``messages`` and ``scores``. So :func:`groups_html` reads each line's
top-level keys and decodes just those two, stepping over the other values (number arrays are
skipped by finding their closing bracket, nothing is built), cuts any message longer than
:data:`HTML_MAX_CHARS` to its head and tail with a note, writes that slim copy under the
same file name in a temporary folder, and hands it to atroposlib's own ``generate_html`` with
the real output path. The page is byte-identical to atroposlib's for every group whose
messages are under the limit, and ``groups.jsonl`` itself is untouched.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from collections.abc import Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

HTML_MAX_CHARS = 100_000  # per message on the page; the full text stays in groups.jsonl
_KEPT = ("messages", "scores")
_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_BRACKET_OR_QUOTE = re.compile(r'[\[\]"{}]')


def _skip_ws(line: str, i: int) -> int:
    match = _WS.match(line, i)
    return match.end() if match else i


def _skip_value(line: str, i: int) -> int:
    """Index just after the JSON value at ``i``, without building it where that is cheap."""
    if line.startswith("[", i):  # token ids, masks, logprobs: arrays of numbers (or of arrays)
        depth = 0
        for match in _BRACKET_OR_QUOTE.finditer(line, i):
            if match.group() not in "[]":
                break  # strings or objects inside: the real decoder steps over it
            depth += 1 if match.group() == "[" else -1
            if depth == 0:
                return match.end()
    return _DECODER.raw_decode(line, i)[1]


def pick(line: str, keys: tuple[str, ...] = _KEPT) -> dict[str, Any]:
    """The top-level ``keys`` of the JSON object on ``line``; other values are not built.

    Raises ``ValueError`` (``json.JSONDecodeError``) on a line that is not a JSON object.
    """
    i = _skip_ws(line, 0)
    if not line.startswith("{", i):
        raise json.JSONDecodeError("expected a JSON object", line, i)
    out: dict[str, Any] = {}
    i = _skip_ws(line, i + 1)
    if line.startswith("}", i):
        return out
    while True:
        if not line.startswith('"', i):
            raise json.JSONDecodeError("expected a key", line, i)
        key, i = scanstring(line, i + 1)
        i = _skip_ws(line, i)
        if not line.startswith(":", i):
            raise json.JSONDecodeError("expected ':'", line, i)
        i = _skip_ws(line, i + 1)
        if key in keys:
            out[key], i = _DECODER.raw_decode(line, i)
        else:
            i = _skip_value(line, i)
        i = _skip_ws(line, i)
        if line.startswith("}", i):
            return out
        if not line.startswith(",", i):
            raise json.JSONDecodeError("expected ',' or '}'", line, i)
        i = _skip_ws(line, i + 1)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    left_out = len(text) - 2 * half
    return (f"{text[:half]}\n\n[… {left_out:,} characters left out of this page; the whole "
            f"text is in the .jsonl file …]\n\n{text[-half:]}")


def _slim_messages(messages: Any, limit: int) -> Any:
    if isinstance(messages, str):
        return _shorten(messages, limit)
    if isinstance(messages, list):
        return [_slim_messages(m, limit) for m in messages]
    if isinstance(messages, dict) and isinstance(messages.get("content"), str):
        return {**messages, "content": _shorten(messages["content"], limit)}
    return messages


def groups_html(input_path: str | Path, output_path: str | Path | None = None,
                limit: int = HTML_MAX_CHARS) -> None:
    """atroposlib's ``generate_html(input_path, output_path)`` over the kept keys only."""
    from atroposlib.frontend.jsonl2html import generate_html

    source = Path(input_path)
    target = Path(output_path) if output_path is not None else source.with_suffix(".html")
    if not source.is_file():
        generate_html(str(source), str(target))  # atroposlib's own message and exit
        return
    with tempfile.TemporaryDirectory(prefix="hermes-groups-html-") as tmp:
        slim = Path(tmp) / source.name  # same name: the page title names the file
        with open(source, encoding="utf-8") as src, open(slim, "w", encoding="utf-8") as dst:
            for line in src:
                if not line.strip():
                    continue
                try:
                    group = pick(line)
                except ValueError:
                    dst.write(line if line.endswith("\n") else line + "\n")  # atroposlib warns
                    continue
                if "messages" in group:
                    group["messages"] = _slim_messages(group["messages"], limit)
                dst.write(json.dumps(group) + "\n")
        generate_html(str(slim), str(target))


@contextlib.contextmanager
def bounded_groups_html() -> Iterator[None]:
    """While active, atroposlib's ``process_manager`` writes its page with :func:`groups_html`.

    atroposlib calls ``generate_html`` by the name it imported into ``atroposlib.envs.base``,
    with no hook to pass another; that one name is swapped for the duration and restored.
    """
    import atroposlib.envs.base as atropos_base

    original = atropos_base.generate_html
    atropos_base.generate_html = groups_html
    try:
        yield
    finally:
        atropos_base.generate_html = original
