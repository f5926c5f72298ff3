"""Static rules: the seed's pitfalls, found in the environment's source without running it.

Each rule is one small function registered with :func:`rule`; the registry refuses duplicate
ids and is exposed read-only as :data:`RULES` (insertion order = checklist order). A rule gets
the parsed file and an :class:`Emitter` and reports findings with a line number, a message
saying what goes wrong at run time, and the fix.

The rules live in :mod:`._rules_agent` (how rollouts are run, scored and logged),
:mod:`._rules_metrics` (training buffers, judges), :mod:`._rules_config` (servers,
providers, toolsets) and :mod:`._rules_volatile` (clock, uuid and random values in prompts);
:func:`check_static` imports them, which registers them.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from hermes_replay._check._findings import Finding, RuleRow, Severity
from hermes_replay._check._source import EnvSource

PARSE_RULE = "parse"


class Emitter:
    """Collects the findings of one rule on one file."""

    def __init__(self, src: EnvSource, rule: Rule):
        self.src = src
        self.rule = rule
        self.findings: list[Finding] = []

    def _add(self, severity: Severity, where: ast.AST | int | None, message: str, fix: str | None):
        line = where if isinstance(where, int) or where is None else getattr(where, "lineno", None)
        self.findings.append(
            Finding(self.rule.id, severity, self.src.display, line, message, fix or self.rule.fix)
        )

    def fail(self, where: ast.AST | int | None, message: str, fix: str | None = None) -> None:
        self._add("fail", where, message, fix)

    def warn(self, where: ast.AST | int | None, message: str, fix: str | None = None) -> None:
        self._add("warn", where, message, fix)


RuleCheck = Callable[[EnvSource, Emitter], None]


@dataclass(frozen=True)
class Rule:
    """A static rule: id (stable; CI and tests key on it), checklist title, default fix."""

    id: str
    title: str
    fix: str
    check: RuleCheck
    hermes_only: bool = False  # a rule of the Hermes layer: not applied to plain envs


_RULES: dict[str, Rule] = {}
RULES: MappingProxyType[str, Rule] = MappingProxyType(_RULES)


def rule(rule_id: str, title: str, fix: str, *,
         hermes_only: bool = False) -> Callable[[RuleCheck], RuleCheck]:
    """Register a rule function under ``rule_id`` (a duplicate id is a programming error).
    ``hermes_only``: the rule is about the Hermes layer (its agent loop, ``AgentResult``,
    ``ToolContext``, ``compute_reward``, toolsets) and is left out for plain atroposlib envs."""

    def register(func: RuleCheck) -> RuleCheck:
        if rule_id in _RULES or rule_id == PARSE_RULE:
            raise ValueError(f"static rule {rule_id!r} is already registered")
        _RULES[rule_id] = Rule(rule_id, title, fix, func, hermes_only)
        return func

    return register


def check_static(path: Path | str, display: str | None = None) -> list[RuleRow]:
    """One row for parsing, then one row per registered rule, for the file at ``path`` (for a
    plain atroposlib env, the rules that are not the Hermes layer's only)."""
    _load_rules()
    display = display or str(path)
    parse_row = RuleRow(PARSE_RULE, "the file parses as Python")
    try:
        src = EnvSource(path, display=display)
    except SyntaxError as exc:
        parse_row.findings.append(
            Finding(PARSE_RULE, "fail", display, exc.lineno, f"syntax error: {exc.msg}",
                    "fix the syntax error; no other static rule can run until the file parses")
        )
        skipped = [
            RuleRow(r.id, r.title, [Finding(r.id, "warn", display, None,
                                            "not checked: the file does not parse", r.fix)])
            for r in _RULES.values()
        ]
        return [parse_row, *skipped]
    rows = [parse_row]
    plain = src.plain
    for registered in _RULES.values():
        if plain and registered.hermes_only:
            continue
        emitter = Emitter(src, registered)
        registered.check(src, emitter)
        rows.append(RuleRow(registered.id, registered.title, _dedupe(emitter.findings)))
    return rows


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.line or 0, f.message)):
        key = (finding.line, finding.message)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out


# Checklist order is registration order, so the modules are imported in this order.
RULE_MODULES = ("_rules_agent", "_rules_metrics", "_rules_config", "_rules_volatile")


def _load_rules() -> None:
    # Imported for their registration side effect; lazily, so this module stays importable
    # from the rule modules without a cycle.
    for name in RULE_MODULES:
        importlib.import_module(f"hermes_replay._check.{name}")
