"""``replay --twice`` over a corpus: each cassette replayed twice in fresh interpreters
(``_runner.twice``), so the first request field, tool result or reward that differs between
two runs — what makes a cassette flaky — is found before CI finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_replay._corpus.arguments import check_out
from hermes_replay._corpus.corpus import default_out
from hermes_replay._corpus.discover import discover
from hermes_replay._runner.options import RunOptions

__all__ = ["replay_corpus_twice"]


def replay_corpus_twice(target: Path, out: Path | None, options: RunOptions, *,
                        started: Callable[[Path], None] | None = None,
                        done: Callable[[Any], None] | None = None) -> tuple[list[Any], Path]:
    """Each cassette under ``target`` replayed twice into ``out`` (default a new
    ``replay-out/<time>``); the ``TwiceReport`` of each, and the out folder. ``CorpusError``
    when there is nothing to replay."""
    from hermes_replay._runner.twice import replay_twice

    check_out(out)  # a file, or a folder below one, is refused before anything runs
    corpus = discover(target)
    where = out or default_out()
    check_out(where)
    reports = []
    for cassette, name in zip(corpus.cassettes, corpus.outputs, strict=True):
        if started is not None:
            started(cassette)
        report = replay_twice(cassette, where / name, **_twice_options(options))
        reports.append(report)
        if done is not None:
            done(report)
    return reports, where


def _twice_options(options: RunOptions) -> dict[str, Any]:
    """What ``replay_twice`` takes of the run's options (JSON: it hands them to each fresh
    interpreter)."""
    keep: dict[str, Any] = {"tools": options.tools, "block_network": options.block_network,
                            "max_misses": options.max_misses}
    if options.tool_overrides:
        keep["tool_overrides"] = dict(options.tool_overrides)
    if options.trust_cassette:
        keep["trust_cassette"] = True
    if options.ignore_paths:
        keep["ignore_paths"] = list(options.ignore_paths)
    if options.normalizers:
        keep["normalizers"] = list(options.normalizers)
    return keep
