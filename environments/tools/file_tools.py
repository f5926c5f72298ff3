"""Toolset ``file``: read, write, search and patch files inside the task's sandbox.

Paths are sandbox paths (relative to the working directory, or absolute inside it); a path
that resolves outside — ``..``, an absolute host path, a symlink pointing out — is refused
with an ``{"error": ...}`` result, which counts as a tool error. Every failure comes back as
``{"error": ...}`` so the model can read it and correct itself.
"""

from __future__ import annotations

import codecs
import fnmatch
import io
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

from .registry import register_tool
from .sandbox import get_sandbox

__all__ = ["MAX_READ_CHARS", "patch", "read_file", "search_files", "write_file"]

MAX_READ_CHARS = 100_000
MAX_SEARCH_RESULTS = 200
SEARCH_SECONDS = 30.0  # one search_files call walks no longer than this


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _guard(fn: Callable[[dict[str, Any], str], str]) -> Callable[[dict[str, Any], str], str]:
    """Turn the expected failures (missing file, refused path, bad args) into error results."""

    def wrapper(args: dict[str, Any], task_id: str) -> str:
        try:
            return fn(args, task_id)
        except KeyError as exc:
            return _json({"error": f"missing required argument {exc.args[0]!r}"})
        except OSError as exc:
            # strerror + the path the model gave, never the host path: tool results go back
            # into the next request, and a per-process temp path would differ on replay.
            detail = exc.strerror or str(exc)
            path = args.get("path")
            where = f": {path!r}" if isinstance(path, str) and exc.strerror else ""
            return _json({"error": f"{type(exc).__name__}: {detail}{where}"})
        except (ValueError, TypeError, re.error) as exc:
            return _json({"error": f"{type(exc).__name__}: {exc}"})

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args[key]
    if not isinstance(value, str):
        raise TypeError(f"argument {key!r} must be a string, not {type(value).__name__}")
    return value


@register_tool(
    "read_file",
    "file",
    {
        "description": "Read a text file from your working directory.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "File path."}},
            "required": ["path"],
        },
    },
)
@_guard
def read_file(args: dict[str, Any], task_id: str) -> str:
    """The first ``MAX_READ_CHARS`` characters. Only as many bytes as could hold them are
    read (4 per character in UTF-8), so a huge or sparse file costs the host no more than a
    small one, and is shown cut rather than refused."""
    path = _str_arg(args, "path")
    data, size = get_sandbox(task_id).read_head(path, 4 * MAX_READ_CHARS + 4)
    complete = len(data) >= size
    # a character cut at the end of what was read is dropped, not shown as U+FFFD
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    content = decoder.decode(data, final=complete)
    result: dict[str, Any] = {"path": path, "content": content[:MAX_READ_CHARS]}
    if complete and len(content) > MAX_READ_CHARS:
        result["truncated"] = f"showing the first {MAX_READ_CHARS} of {len(content)} characters"
    elif not complete:
        result["truncated"] = (f"showing the first {len(result['content'])} characters of "
                               f"a {size}-byte file")
    return _json(result)


@register_tool(
    "write_file",
    "file",
    {
        "description": "Write (create or overwrite) a text file in your working directory.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path."},
                "content": {"type": "string", "description": "The full new file content."},
            },
            "required": ["path", "content"],
        },
    },
)
@_guard
def write_file(args: dict[str, Any], task_id: str) -> str:
    content = _str_arg(args, "content")
    written = get_sandbox(task_id).write_file(_str_arg(args, "path"), content)
    return _json({"path": written, "bytes_written": len(content.encode())})


@register_tool(
    "search_files",
    "file",
    {
        "description": "Search files under a directory for a regular expression.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Python regular expression."},
                "path": {"type": "string", "description": "Directory to search (default .)."},
                "glob": {"type": "string", "description": "Only file names matching this."},
            },
            "required": ["pattern"],
        },
    },
)
@_guard
def search_files(args: dict[str, Any], task_id: str) -> str:
    regex = re.compile(_str_arg(args, "pattern"))
    sandbox = get_sandbox(task_id)
    start = sandbox.resolve(args.get("path") or ".")
    root = sandbox.resolve(".")
    if not os.path.exists(start):
        return _json({"error": f"FileNotFoundError: no such file or directory: {args['path']!r}"})
    name_glob = args.get("glob")
    matches: list[dict[str, Any]] = []
    files = [start] if os.path.isfile(start) else _walk(start)
    deadline = time.monotonic() + SEARCH_SECONDS
    for host_path in files:
        if name_glob and not fnmatch.fnmatch(os.path.basename(host_path), name_glob):
            continue
        if time.monotonic() > deadline:
            return _json({"matches": matches, "truncated": True,
                          "note": f"the search stopped after {SEARCH_SECONDS:g} s"})
        try:
            # symlinked files pointing out, FIFOs, devices and huge files are skipped: the
            # read never follows a link out, never blocks, and is bounded (_host_io)
            text = sandbox.read_bytes(sandbox.resolve(host_path)).decode("utf-8")
        except (UnicodeDecodeError, PermissionError, OSError):
            continue  # binary, special or unreadable files are not search results
        for lineno, line in enumerate(io.StringIO(text, newline=None), 1):  # as open() reads
            if regex.search(line):
                rel = os.path.relpath(host_path, root)
                matches.append({"path": rel, "line": lineno, "text": line.rstrip("\n")})
                if len(matches) >= MAX_SEARCH_RESULTS:
                    return _json({"matches": matches, "truncated": True})
    return _json({"matches": matches, "truncated": False})


def _walk(top: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames))
    return out


@register_tool(
    "patch",
    "file",
    {
        "description": (
            "Replace an exact piece of text in a file. old_string must occur exactly once "
            "unless replace_all is true."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string", "description": "Exact text to replace."},
                "new_string": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
)
@_guard
def patch(args: dict[str, Any], task_id: str) -> str:
    path = _str_arg(args, "path")
    old, new = _str_arg(args, "old_string"), _str_arg(args, "new_string")
    if not old:
        return _json({"error": "old_string is empty; use write_file to create a file"})
    sandbox = get_sandbox(task_id)
    text = sandbox.read_file(path)
    count = text.count(old)
    if count == 0:
        return _json(
            {"error": f"old_string not found in {path}; read the file and copy it exactly"}
        )
    if count > 1 and not args.get("replace_all"):
        return _json(
            {"error": f"old_string occurs {count} times in {path}; add context or set replace_all"}
        )
    sandbox.write_file(path, text.replace(old, new))
    return _json({"path": path, "replacements": count if args.get("replace_all") else 1})
