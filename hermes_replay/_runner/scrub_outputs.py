"""Scrub what a live run writes outside the cassette: the terminal and the env's files.

A recording runs the environment's own CLI, which prints (atroposlib logs its server
configs, base URL included) and writes files (``groups.jsonl`` / ``.html`` from
``process``, ``evaluate_config.yaml`` / ``samples.jsonl`` / ``metrics.json`` from
``evaluate``). While it runs, its stdout and stderr go through ``scrubbed_streams`` (every
line scrubbed before it is shown); when it ends, ``scrub_outputs`` rewrites the output files
it named (atomically, only if something changed). Both use the shared rules and the known
secrets of this process (``_redact.redact_text``).
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

from hermes_replay._cassette.files import write_text_atomic
from hermes_replay._runner.json_ints import shared_int_decoder
from hermes_replay._secrets.redact import redact_json, redact_text
from hermes_replay._secrets.stream import ScrubbingStream

__all__ = ["ScrubbingStream", "output_paths", "scrub_file", "scrub_outputs",
           "scrubbed_streams"]

_OUTPUT_FLAGS = ("--env.data_path_to_save_groups", "--env.data_dir_to_save_evals")


@contextmanager
def scrubbed_streams() -> Iterator[None]:
    """``sys.stdout``/``sys.stderr`` scrubbed inside the block (what the env prints)."""
    out, err = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            yield
    finally:
        out.drain()
        err.drain()


def output_paths(argv: Sequence[str]) -> list[Path]:
    """The files and folders an env CLI argv tells the env to write."""
    from hermes_replay._runner.plan import flag_value

    paths: list[Path] = []
    for flag in _OUTPUT_FLAGS:
        value = flag_value(argv, flag)
        if not value:
            continue
        path = Path(value)
        paths.append(path)
        if flag.endswith("groups") and path.parent.is_dir():
            # atroposlib writes groups_1.jsonl when groups.jsonl exists, and HTML beside them
            paths += [p for p in path.parent.glob(f"{glob.escape(path.stem)}*")
                      if p.suffix in (".jsonl", ".html") and p != path]
    return paths


def scrub_file(path: Path) -> bool:
    """Rewrite ``path`` with its secrets scrubbed (JSON Lines line by line, JSON as JSON,
    anything else as text); True if it changed. Atomic: a crash leaves the old file."""
    if path.suffix == ".jsonl":
        return _scrub_jsonl(path)
    try:
        original = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if path.suffix == ".json":
        try:
            value = json.loads(original)
        except ValueError:
            text = redact_text(original)
        else:
            cleaned = redact_json(value)
            text = original if cleaned == value else json.dumps(cleaned, indent=2,
                                                                 ensure_ascii=False)
    else:
        text = redact_text(original)
    if text == original:
        return False
    write_text_atomic(path, text, suffix=_TMP_SUFFIX)
    return True


_TMP_SUFFIX = ".scrub"  # temp files of a rewrite in progress (never taken for outputs)


def _tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}{_TMP_SUFFIX}")


def _scrub_jsonl(path: Path) -> bool:
    """JSON Lines streamed one line at a time (a huge reply's ``groups.jsonl`` is never held
    whole, and its token ids share int objects); replaced only if a line changed."""
    decoder = shared_int_decoder()
    tmp = _tmp_path(path)
    changed = False
    try:
        # newline="": line ends are kept exactly; a raw U+2028 inside a JSON string is no end.
        with open(path, encoding="utf-8", newline="") as src, \
                open(tmp, "w", encoding="utf-8", newline="") as dst:
            for line in src:
                try:
                    value = decoder.decode(line)
                except ValueError:
                    cleaned_line = redact_text(line)
                else:
                    cleaned = redact_json(value)
                    cleaned_line = line if cleaned == value else (
                        json.dumps(cleaned, ensure_ascii=False)
                        + line[len(line.rstrip("\r\n")):])
                changed = changed or cleaned_line != line
                dst.write(cleaned_line)
        if changed:
            os.replace(tmp, path)
    except (OSError, UnicodeDecodeError):
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return changed


def scrub_outputs(argv: Sequence[str]) -> list[Path]:
    """Scrub every file the env wrote at the output paths of ``argv``; the changed ones."""
    changed: list[Path] = []
    for path in output_paths(argv):
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and scrub_file(file):
                changed.append(file)
    return changed


@contextmanager
def scrubbed_run(argv: Sequence[str]) -> Iterator[None]:
    """A live env run with nothing secret shown or left in its output files: the secrets
    in ``argv`` (flag values, URL passwords) and in credential-named environment variables
    become known, the streams are scrubbed while it runs and its files when it ends."""
    from hermes_replay._secrets.known import KNOWN
    from hermes_replay._secrets.redact import redact_argv

    KNOWN.add_environ()
    redact_argv(argv)  # registers what it hides
    try:
        with scrubbed_streams():
            yield
    finally:
        scrub_outputs(argv)
