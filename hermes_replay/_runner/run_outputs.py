"""What a recording's environment wrote into the project, so a failed recording can take it back.

``process``: atroposlib's ``BaseEnv.__init__`` picks a file name nobody has used yet
(``groups_1.jsonl`` when ``groups.jsonl`` exists) and opens it; ``process`` writes the HTML
beside it at the end. The name is the env's final ``config`` value, read right after
``__init__``: the file is this run's own by construction, so removing it never touches an
earlier run's.

``evaluate``: the CLI writes ``evaluate_config.yaml`` into ``data_dir_to_save_evals`` before the
env exists (overwriting an earlier run's), and ``metrics.json``/``samples.jsonl`` at the end.
A failed recording puts each of those back as it was (an earlier run's copy restored, a new one
removed) and removes the folder when this run made it and left nothing else in it. The folder
is known before the run when the command line names it; when only the env's ``config_init``
does, it is learnt at ``__init__``, after the config file was written, so then only the results
written later are taken back.

A recording that failed (a dead endpoint, a crash) must not leave files behind that look like
a run's data, nor lose an earlier run's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

__all__ = ["RunOutputs", "run_outputs"]

EVAL_FILES = ("evaluate_config.yaml", "metrics.json", "samples.jsonl")


class RunOutputs:
    """The outputs one run's environments wrote; ``take_back()`` undoes them."""

    def __init__(self) -> None:
        self._keep: Path | None = None  # copies of the files an earlier run left in an eval folder
        self.groups_files: list[Path] = []
        self._eval_folders: dict[Path, tuple[bool, dict[str, Path | None]]] = {}

    def watch_eval_folder(self, folder: Path) -> None:
        """Remember ``folder``'s eval files as they are now (once per folder)."""
        folder = folder.absolute()
        if folder in self._eval_folders:
            return
        existed = folder.is_dir()
        before: dict[str, Path | None] = {}
        for name in EVAL_FILES:
            path = folder / name
            before[name] = None
            if existed and path.is_file() and not path.is_symlink():
                if self._keep is None:
                    self._keep = Path(tempfile.mkdtemp(prefix="hermes-replay-outputs-"))
                copy = self._keep / f"{len(self._eval_folders)}-{name}"
                with suppress(OSError):
                    shutil.copyfile(path, copy)
                    before[name] = copy
        self._eval_folders[folder] = (existed, before)

    def take_back(self) -> None:
        """Remove this run's groups files; put every watched eval folder back as it was."""
        for path in self.groups_files:
            _remove(path)
        for folder, (existed, before) in self._eval_folders.items():
            for name, copy in before.items():
                path = folder / name
                if copy is None:
                    _remove(path)
                else:
                    with suppress(OSError):
                        shutil.copyfile(copy, path)
            if not existed:
                with suppress(OSError):
                    folder.rmdir()  # only when empty: anything else in it is not ours
        self.discard()

    def discard(self) -> None:
        """Forget the copies (the run succeeded, or they were put back)."""
        if self._keep is not None:
            shutil.rmtree(self._keep, ignore_errors=True)
            self._keep = None


def _remove(path: Path) -> None:
    """Remove a file (a link as a link); gone already is fine."""
    with suppress(OSError):
        if path.is_symlink() or path.is_file():
            path.unlink()


@contextmanager
def run_outputs(argv: Sequence[str]) -> Iterator[RunOutputs]:
    """Inside the block, what each atroposlib environment created will write is noted on the
    yielded ``RunOutputs`` (its groups file and HTML, its eval folder's files); the caller
    ends it with ``take_back()`` (the run failed) or ``discard()``."""
    from atroposlib.envs.base import BaseEnv

    from hermes_replay._runner.plan import flag_value

    original = BaseEnv.__init__
    evaluate = list(argv)[:1] == ["evaluate"]
    outputs = RunOutputs()
    named = flag_value(list(argv), "--env.data_dir_to_save_evals")
    if evaluate and named:
        outputs.watch_eval_folder(Path(named))

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        config = getattr(self, "config", None)
        path = getattr(config, "data_path_to_save_groups", None)
        if isinstance(path, str) and path:
            outputs.groups_files.extend([Path(path).absolute(),
                                         Path(path).absolute().with_suffix(".html")])
        evals = getattr(config, "data_dir_to_save_evals", None)
        if evaluate and isinstance(evals, str) and evals:
            outputs.watch_eval_folder(Path(evals))

    BaseEnv.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield outputs
    finally:
        BaseEnv.__init__ = original  # type: ignore[method-assign]
