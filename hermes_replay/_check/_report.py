"""The checklist as a table for people and as JSON for CI.

JSON schema (stable; CI scripts key on it): a list of objects, each exactly
``{"rule": str, "status": "pass"|"warn"|"fail", "file": str, "line": int|null,
"message": str, "fix": str|null}`` — one object per finding, and one ``pass`` object (message =
the rule's title, line and fix null) for each rule that found nothing. Rules appear in
checklist order; findings within a rule by line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hermes_replay._check._findings import RuleRow, overall_exit_code

JSON_KEYS = ("rule", "status", "file", "line", "message", "fix")
_MARK = {"pass": "pass", "warn": "WARN", "fail": "FAIL"}


def to_records(rows: list[RuleRow], file: str) -> list[dict[str, Any]]:
    """The JSON records (see the module docstring) for ``rows`` checked on ``file``."""
    records: list[dict[str, Any]] = []
    for row in rows:
        if not row.findings:
            records.append({"rule": row.rule, "status": "pass", "file": file, "line": None,
                            "message": row.title, "fix": None})
        for finding in row.findings:
            records.append({"rule": finding.rule, "status": finding.severity,
                            "file": finding.file, "line": finding.line,
                            "message": finding.message, "fix": finding.fix})
    return records


def render_json(rows: list[RuleRow], file: str) -> str:
    return json.dumps(to_records(rows, file), indent=2)


def render_table(rows: list[RuleRow], file: str) -> str:
    return "\n".join(table_lines(rows, file))


def table_lines(rows: list[RuleRow], file: str) -> Iterator[str]:
    """One line per rule; under a warn/fail, each finding's place, message and fix."""
    width = max([len(r.rule) for r in rows] + [4])
    yield f"hermes-replay check {file}"
    yield ""
    yield f"  {'STATUS':<6}  {'RULE':<{width}}  CHECK"
    indent = " " * (2 + 6 + 2)
    for row in rows:
        yield f"  {_MARK[row.status]:<6}  {row.rule:<{width}}  {row.title}"
        for finding in row.findings:
            yield f"{indent}{finding.location}: {finding.severity}: {finding.message}"
            yield f"{indent}  fix: {finding.fix}"
    counts = {status: sum(1 for r in rows if r.status == status)
              for status in ("pass", "warn", "fail")}
    yield ""
    summary = (f"{counts['pass']} passed, {counts['warn']} warning(s), "
               f"{counts['fail']} failed")
    if overall_exit_code(rows):
        yield f"{summary} — fix the failures above (exit 1)"
    else:
        yield f"{summary} — ok"
