"""A replay's output folder holds one run, written as files of its own — never through a link.

``run_cassette`` points the env's output flags into ``out_dir`` (``plan.redirect_outputs``)
and writes ``env.log`` and ``result.json`` there. Two things went wrong with a folder that was
used before or that someone else can write to:

- a reused folder mixed runs: atroposlib does not overwrite a groups file, it writes
  ``groups_1.jsonl`` beside it, while the harness read ``groups.jsonl`` — the previous run's;
- a symlink planted at one of those names (``env.log``, ``groups.jsonl``, ``evals``) made the
  replay write through it, to wherever it pointed.

So before the run, what an earlier run left at the names this run writes is removed — links
as links (their targets are never touched), folders with ``rmtree`` (which does not follow
links inside them) — and a folder that is itself a link is refused.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from hermes_replay._errors import CassetteError
from hermes_replay._runner.plan import flag_value

__all__ = ["fresh_out_dir"]

RUN_FILES = ("env.log", "result.json")
#: what atroposlib's evaluate writes into its folder (an earlier run's, safe to remove)
EVAL_FILES = frozenset({"metrics.json", "samples.jsonl", "evaluate_config.yaml"})
_GROUPS_FLAG = "--env.data_path_to_save_groups"
_EVALS_FLAG = "--env.data_dir_to_save_evals"


def fresh_out_dir(out: Path, argv: Sequence[str]) -> None:
    """Make ``out`` ready for one run of ``argv`` (already redirected into it).

    An ``evals`` folder is removed whole only when it is an earlier run's: ``out`` holds that
    run's ``result.json``, or the folder holds only what evaluate writes. A folder of other
    files (``--out .`` in a project with an ``evals/`` of its own) is refused, not deleted.
    """
    if out.is_symlink():
        raise CassetteError(
            f"the output folder {out} is a symlink (to {out.resolve()}); a replay writes only "
            "into a real folder", path=out, hint="remove the link or pass another --out")
    out.mkdir(parents=True, exist_ok=True)
    earlier_run = (out / "result.json").is_file() and not (out / "result.json").is_symlink()
    for name in RUN_FILES:
        _remove(out / name)
    groups = flag_value(argv, _GROUPS_FLAG)
    if groups:
        path = Path(groups)
        if path.parent == out:
            # atroposlib's numbered siblings (groups_1.jsonl …) and their HTML pages
            numbered = re.compile(re.escape(path.stem) + r"(_\d+)?\.(jsonl|html)")
            for sibling in out.iterdir():
                if numbered.fullmatch(sibling.name):
                    _remove(sibling)
    evals = flag_value(argv, _EVALS_FLAG)
    if evals and Path(evals).parent == out:
        folder = Path(evals)
        if folder.is_dir() and not folder.is_symlink():
            foreign = [p.name for p in folder.iterdir()
                       if p.name not in EVAL_FILES or not p.is_file() or p.is_symlink()]
            if foreign and not earlier_run:  # not an earlier run's output: not ours
                raise CassetteError(
                    f"{folder} holds files an evaluate run does not write "
                    f"({', '.join(sorted(foreign)[:3])}); a replay would mix its results "
                    "with them", path=folder, hint="pass an empty or new --out")
        _remove(folder)


def _remove(path: Path) -> None:
    """Remove ``path`` whatever it is; a link is removed itself, never what it points at."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():  # a FIFO or a socket planted there
        path.unlink(missing_ok=True)
