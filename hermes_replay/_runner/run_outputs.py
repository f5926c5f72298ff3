"""The ``groups.jsonl`` (and ``.html``) files an environment of this run opened.

atroposlib's ``BaseEnv.__init__`` picks a file name nobody has used yet (``groups_1.jsonl``
when ``groups.jsonl`` exists) and opens it; ``process`` writes the HTML beside it at the end.
A recording that failed (a dead endpoint, a crash) must not leave those behind in the project,
where they look like a run's data. The name is the env's final ``config`` value, read right
after ``__init__``: the file is this run's own by construction, so removing it never touches
an earlier run's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

__all__ = ["groups_files_written", "remove_outputs"]


@contextmanager
def groups_files_written() -> Iterator[list[Path]]:
    """Inside the block, every atroposlib environment created adds the groups file it opened
    (and its ``.html``) to the yielded list."""
    from atroposlib.envs.base import BaseEnv

    opened: list[Path] = []
    original = BaseEnv.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        path = getattr(getattr(self, "config", None), "data_path_to_save_groups", None)
        if isinstance(path, str) and path:
            opened.extend([Path(path).absolute(), Path(path).absolute().with_suffix(".html")])

    BaseEnv.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield opened
    finally:
        BaseEnv.__init__ = original  # type: ignore[method-assign]


def remove_outputs(paths: list[Path]) -> None:
    """Remove these files (a link as a link); gone already is fine."""
    for path in paths:
        with suppress(OSError):
            if path.is_symlink() or path.is_file():
                path.unlink()
