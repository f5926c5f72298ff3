"""Dataset rows for ``dataset_name``/``dataset_split``: Hugging Face ``datasets``, offline first.

``dataset_name`` may be a local file (``.jsonl``/``.json``/``.csv``/``.parquet``/``.txt``), a
local folder (whatever ``datasets.load_dataset(folder)`` reads, e.g. ``train.jsonl`` beside
``test.jsonl``), or a hub id (needs network, or the hub cache). ``datasets`` is imported only
here and only when a dataset is configured (extra ``hermes-replay[datasets]``; atroposlib
installs it too).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DatasetNotLoaded", "load_dataset_rows"]

_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet",
             ".txt": "text"}


class DatasetNotLoaded(ValueError):
    """``dataset_name`` could not be loaded; the message says why and what to pass instead."""


def load_dataset_rows(name: str, split: str = "train") -> list[dict[str, Any]]:
    """Every row of ``split`` as a plain dict, in dataset order."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise DatasetNotLoaded(
            f"dataset_name {name!r} needs the Hugging Face `datasets` package: "
            "pip install 'hermes-replay[datasets]'") from None
    path = Path(name).expanduser()
    try:
        if path.is_file():
            builder = _BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise DatasetNotLoaded(
                    f"dataset file {name!r}: unknown format {path.suffix!r}; use one of "
                    f"{', '.join(sorted(_BUILDERS))}, or a folder")
            rows = load_dataset(builder, data_files={split: str(path)}, split=split)
        elif path.is_dir():
            rows = load_dataset(str(path), split=split)
        else:
            rows = load_dataset(name, split=split)
    except DatasetNotLoaded:
        raise
    except Exception as exc:
        where = "local folder" if path.is_dir() else "hub id"
        hint = ("pass a local file or folder with --env.dataset_name (the hub cannot be reached "
                "offline)" if not path.exists() else
                f"check --env.dataset_split {split!r} and the files in {name!r}")
        raise DatasetNotLoaded(f"dataset_name {name!r} ({where}) could not be loaded, split "
                               f"{split!r}: {type(exc).__name__}: {_first_line(exc)}; {hint}"
                               ) from exc
    return [dict(row) for row in rows]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def offline() -> bool:
    return any(os.environ.get(v, "") not in ("", "0")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
