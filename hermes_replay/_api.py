"""``hermes_replay.cassette(...)``: the one entry point for recording and replaying."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from hermes_replay._session import DEFAULT_LLM_PATHS, Mode, Session
from hermes_replay._summary import ReplayEvent

__all__ = ["cassette"]


def cassette(
    path: str | Path,
    mode: Mode = "replay",
    *,
    header: dict[str, Any] | None = None,
    strict: bool = False,
    ignore_paths: Iterable[str] = (),
    normalizers: Iterable[tuple[Any, str]] = (),
    default_ignores: bool = True,
    llm_paths: Iterable[str] = DEFAULT_LLM_PATHS,
    passthrough_hosts: Iterable[str] = (),
    on_event: Callable[[ReplayEvent], None] | None = None,
    tools: str = "replay",
    tool_overrides: Mapping[str, str] | None = None,
) -> Session:
    """Record or replay all LLM traffic (httpx, httpx2/openai, aiohttp) inside the block.

    ``with cassette("c.jsonl") as session:`` or ``async with``. Modes:

    - ``"replay"``: LLM requests are answered from the cassette and never reach the network;
      a request with no recording gets an HTTP 404 carrying the diagnostic, and the block
      raises ``CassetteMiss`` listing every miss when it exits.
    - ``"record"``: requests go live and are written; the file replaces ``path`` only when
      the block exits cleanly (until then it is ``<path>.partial``).
    - ``"auto"``: replay what is recorded, record what is missing, write the union.
    - ``"passthrough"``: everything goes live and nothing is written.

    Options: ``header`` (fields for the cassette header: env_name, env_file, command …);
    ``strict`` (replay fails on recordings never used); ``ignore_paths`` (e.g.
    ``"body.metadata"``, ``"body.messages[*].name"``) and ``normalizers`` (``(regex, repl)``
    applied to body strings) for matching; ``default_ignores=False`` to match on
    ``user``/``metadata``/``stream_options`` too; ``llm_paths`` (POST path suffixes that
    are LLM traffic; everything else passes through untouched and is never written);
    ``passthrough_hosts`` (hosts never intercepted); ``on_event`` (progress callback).

    Tool calls (made through ``tool_call``) are recorded with the rollout; on replay
    ``tools="replay"`` (default) answers them from the cassette and executes nothing, while
    ``tools="execute"`` runs them again and reports results that drifted (a failure only when
    ``strict``). ``tool_overrides={"name": "execute"}`` sets the policy of single tools.
    """
    return Session(path, mode, header=header, strict=strict, ignore_paths=ignore_paths,
                   normalizers=normalizers, default_ignores=default_ignores,
                   llm_paths=llm_paths, passthrough_hosts=passthrough_hosts, on_event=on_event,
                   tools=tools, tool_overrides=tool_overrides)
