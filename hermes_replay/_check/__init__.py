"""``hermes-replay check ENV_FILE``: the seed's pitfalls and testing checklist, automated.

Static rules read the file's AST (:mod:`._static`); dynamic checks import and run it in
subprocesses (:mod:`._dynamic`); :mod:`._report` renders the checklist as a table or JSON.

Room ``_check``: may import every room up to ``_report``; never ``probe`` or the CLI.
"""

from __future__ import annotations

from pathlib import Path

from hermes_replay._check._dynamic import Target
from hermes_replay._check._findings import Finding, RuleRow, overall_exit_code
from hermes_replay._check._report import render_json, render_table, to_records
from hermes_replay._check._runs import check_dynamic
from hermes_replay._check._static import RULES, check_static

__all__ = [
    "RULES",
    "Finding",
    "RuleRow",
    "Target",
    "check_env",
    "check_static",
    "overall_exit_code",
    "render_json",
    "render_table",
    "to_records",
]


def check_env(path: Path | str, *, target: Target | None = None, dynamic: bool = True,
              display: str | None = None, keep: Path | None = None) -> list[RuleRow]:
    """All checklist rows for the environment file at ``path``: static, then dynamic.

    ``dynamic=False`` runs nothing (static rules only). Otherwise the import test always runs,
    and the model-needing checks run when ``target`` names a cassette or an endpoint; their
    outputs (and, live, the recorded cassettes) are kept in ``keep`` if given.
    """
    path = Path(path)
    display = display or str(path)
    rows = check_static(path, display=display)
    if dynamic:
        rows += check_dynamic(path, display, target or Target(), keep=keep)
    return rows
