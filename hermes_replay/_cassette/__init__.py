"""The cassette: a versioned JSON Lines file of recorded LLM interactions.

Line 1 is the header (``{"type": "header", "schema_version": 2, ...}``); then records:

- ``{"type": "blob", "id", "value"}`` — a long string or tool list, stored once
- ``{"type": "interaction", "rollout", "seq", "kind", "fingerprint", "duration_ms",
  "request": {"method", "url", "headers", "body"}, "response": {"status", "headers",
  "body" | "text" | "chunks"}}`` — bodies use the delta/blob encoding of ``_cassette.format``
- ``{"type": "tool", "rollout", "seq", "turn", "source", "name", "arguments", "result", …}``
  — one tool call and its result (schema 2; see ``_cassette.toolcalls``)
- ``{"type": "outcome", "rollout", ...fields}`` — what the env reported (reward, turns …)
- ``{"type": "annotate", "fields"}`` — only in ``.partial`` files; merged into the header

A finished cassette is rewritten in a stable order (scope-less requests, then rollouts by
id, each turn followed by the tool calls that answer it, then the rollout's reward-time tool
calls and its outcome) so re-recording the same run gives a small git diff.
Writing goes to ``<path>.partial`` (one flushed line per record) and is renamed over
``<path>`` only on a clean close, so a crash never touches an existing cassette.

The shapes live in ``_cassette.model``, reading in ``_cassette.read``, the journal and the
final rewrite in ``_cassette.write``; the body encoding in ``_cassette.format``. This module is the
one place the rest of the package imports them from.

Room ``_cassette``: the format and everything that reads or rewrites a file of it (``files``,
``load``, ``merge``, ``compact``, ``verify``, ``messages``, ``matching``, ``toolcalls``,
``transcript`` — its rollouts as readable text, for ``show``). May
import the foundation, ``_secrets`` and ``_tokenizers``; never a session or a runner.
"""

from __future__ import annotations

from hermes_replay._cassette.model import (
    SCHEMA_VERSION,
    Cassette,
    CassetteHeader,
    Interaction,
    RolloutRecord,
    partial_path,
)
from hermes_replay._cassette.read import load_cassette, paused_gc
from hermes_replay._cassette.write import (
    CassetteWriter,
    file_records,
    rewrite_header,
    write_cassette,
)

__all__ = [
    "SCHEMA_VERSION",
    "Cassette",
    "CassetteHeader",
    "CassetteWriter",
    "Interaction",
    "RolloutRecord",
    "file_records",
    "load_cassette",
    "partial_path",
    "paused_gc",
    "rewrite_header",
    "write_cassette",
]
