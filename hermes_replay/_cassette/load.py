"""``load_cassette``: one cassette file (``.jsonl``, ``.jsonl.zst``, a ``.partial``) or a folder
of shards read as the cassette they merge into.

Its own module because files are read by ``_cassette`` and folders joined by ``_cassette.merge``,
which
reads its shards through ``_cassette``: the entry point that takes both sits above the two.
"""

from __future__ import annotations

from pathlib import Path

from hermes_replay._cassette import Cassette
from hermes_replay._cassette import load_cassette as load_file
from hermes_replay._cassette.merge import load_shards

__all__ = ["load_cassette"]


def load_cassette(path: str | Path) -> Cassette:
    """Read a cassette (or a ``.partial`` one); raises ``CassetteError`` naming file:line.

    ``.jsonl`` and zstd-compressed ``.jsonl.zst`` read alike (see ``_cassette.files``); a folder of
    shards (``<cassette>.shards/``) reads as the one cassette they merge into (nothing is
    written; shards that cannot merge raise ``MergeError`` as ``merge`` would).
    """
    path = Path(path)
    return load_shards(path) if path.is_dir() else load_file(path)
