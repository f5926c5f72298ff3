"""What a check produces: findings, and one checklist row per rule.

A *finding* is one problem at one place (file:line) with the fix. A *row* is one line of the
checklist: a rule (static or dynamic) and its status — ``fail`` if any finding of it is a
failure, ``warn`` if it only has warnings (or could not run), ``pass`` otherwise. The JSON
schema for CI is built from rows (see :mod:`hermes_replay._check._report`), so field names here
are part of that contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["fail", "warn"]
Status = Literal["pass", "warn", "fail"]

# Severity order, used to pick a row's status from its findings.
_RANK: dict[str, int] = {"pass": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class Finding:
    """One problem the check found, where it is, and what to do about it."""

    rule: str
    severity: Severity
    file: str
    line: int | None
    message: str
    fix: str

    @property
    def location(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


@dataclass
class RuleRow:
    """One checklist line: a rule, its one-line title, and what it found."""

    rule: str
    title: str
    findings: list[Finding] = field(default_factory=list)
    kind: Literal["static", "dynamic"] = "static"

    @property
    def status(self) -> Status:
        worst: Status = "pass"
        for finding in self.findings:
            if _RANK[finding.severity] > _RANK[worst]:
                worst = finding.severity
        return worst


def overall_exit_code(rows: list[RuleRow]) -> int:
    """1 if any row failed (CI must stop), else 0 — warnings never fail a run."""
    return 1 if any(row.status == "fail" for row in rows) else 0
