"""``hermes-replay check ENV_FILE``: the seed's pitfalls and testing checklist, automated.

Static rules read the file's AST (:mod:`._static`); dynamic checks import and run it in
subprocesses (:mod:`._dynamic`); :mod:`._report` renders the checklist as a table or JSON. A
plain atroposlib env (no Hermes layer in the file) gets the rules that hold for any env: the
Hermes layer's are left out, and rewards are judged by what any trainer needs, not by [0, 1].

Room ``_check``: may import every room up to ``_report``; never ``probe`` or the CLI.
"""

from __future__ import annotations

from pathlib import Path

from hermes_replay._check._dynamic import Target
from hermes_replay._check._findings import Finding, RuleRow, overall_exit_code
from hermes_replay._check._report import render_json, render_table, to_records
from hermes_replay._check._runs import check_dynamic
from hermes_replay._check._source import is_plain_env
from hermes_replay._check._static import RULES, check_static

__all__ = [
    "RULES",
    "Finding",
    "RuleRow",
    "Target",
    "check_env",
    "check_static",
    "is_plain_env",
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
        rows += check_dynamic(path, display, target or Target(), keep=keep,
                              plain=is_plain_env(path))
    return rows
