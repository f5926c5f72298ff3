"""The environment file as an AST, with the few questions the static rules keep asking.

Nothing here imports or runs the environment: a broken import must not stop the checklist,
and checking a file must never start a server or a sandbox. The cost is that the rules reason
about names, not types — they follow ``self.method()`` calls inside one class (and its bases in
the same file), which is how environment code is written in practice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hermes_replay._pyast import parse

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class ClassInfo:
    """One class of the file: its methods by name and its base names (last dotted part)."""

    node: ast.ClassDef
    methods: dict[str, FunctionNode] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)


_HERMES_MODULES = frozenset({"environments.hermes_base_env", "environments.agent_loop",
                             "environments.tool_context", "environments.tool_call_parsers"})


class EnvSource:
    """A parsed environment file. Raises ``SyntaxError`` from the constructor if it won't parse."""

    def __init__(self, path: Path | str, text: str | None = None, display: str | None = None):
        self.path = Path(path)
        self.display = display or str(path)
        self.text = self.path.read_text(encoding="utf-8") if text is None else text
        self.tree = parse(self.text, self.display)
        self.classes: dict[str, ClassInfo] = {}
        # Module-level helpers: followed like methods (evaluate -> run_eval_item(...) -> loop).
        self.module_functions: dict[str, FunctionNode] = {
            node.name: node for node in self.tree.body if isinstance(node, FunctionNode)
        }
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                info = ClassInfo(node, bases=[_last_name(b) for b in node.bases])
                for item in node.body:
                    if isinstance(item, FunctionNode):
                        info.methods[item.name] = item
                self.classes[node.name] = info

    @property
    def plain(self) -> bool:
        """True for a plain atroposlib environment: the file uses atroposlib (a ``BaseEnv``
        subclass, an import of it) and nothing of the Hermes layer — no ``HermesAgentBaseEnv``
        base, no import from ``environments.hermes_base_env``/``agent_loop``/``tool_context``.
        A file that shows neither (a snippet, a helper module) is judged as a Hermes env."""
        hermes = plain = False
        for info in self.classes.values():
            hermes |= "HermesAgentBaseEnv" in info.bases
            plain |= "BaseEnv" in info.bases
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                hermes |= node.module in _HERMES_MODULES
                plain |= node.module.split(".")[0] == "atroposlib"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    hermes |= alias.name in _HERMES_MODULES
                    plain |= alias.name.split(".")[0] == "atroposlib"
        return plain and not hermes

    def functions(self) -> Iterator[FunctionNode]:
        """Every function or method in the file, nested ones included."""
        for node in ast.walk(self.tree):
            if isinstance(node, FunctionNode):
                yield node

    def methods_named(self, name: str) -> Iterator[tuple[ClassInfo, FunctionNode]]:
        for info in self.classes.values():
            if name in info.methods:
                yield info, info.methods[name]

    def lookup(self, cls: ClassInfo, name: str) -> FunctionNode | None:
        """A method of ``cls`` or of a base class defined in this file (depth-first)."""
        seen: set[str] = set()
        stack = [cls]
        while stack:
            info = stack.pop(0)
            if info.node.name in seen:
                continue
            seen.add(info.node.name)
            if name in info.methods:
                return info.methods[name]
            stack.extend(self.classes[b] for b in info.bases if b in self.classes)
        return None

    def closure(
        self, cls: ClassInfo, start: FunctionNode, stop: Iterable[str] = ()
    ) -> list[FunctionNode]:
        """``start`` plus every method (``self.name(...)``) and module-level function
        (``name(...)``) of this file that it reaches.

        Names in ``stop`` are not entered (e.g. ``compute_reward`` when asking what
        ``evaluate`` does on its own).
        """
        stop_names = set(stop)
        out: list[FunctionNode] = []
        todo = [start]
        while todo:
            func = todo.pop()
            if any(func is f for f in out):
                continue
            out.append(func)
            for name, _call in self_calls(func):
                if name in stop_names:
                    continue
                target = self.lookup(cls, name)
                if target is not None:
                    todo.append(target)
            for call in calls(func):
                if isinstance(call.func, ast.Name) and call.func.id not in stop_names:
                    helper = self.module_functions.get(call.func.id)
                    if helper is not None:
                        todo.append(helper)
        return out

    def class_constant_strings(self, cls: ClassInfo, name: str) -> set[str] | None:
        """String items of a class-level ``name = (...)`` in ``cls`` or its bases, or None."""
        found: set[str] | None = None
        for info in [cls, *(self.classes[b] for b in cls.bases if b in self.classes)]:
            for stmt in info.node.body:
                value = _class_assignment(stmt, name)
                if value is None:
                    continue
                strings = {
                    elt.value
                    for elt in getattr(value, "elts", [])
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
                }
                found = (found or set()) | strings
        return found


def _class_assignment(stmt: ast.stmt, name: str) -> ast.expr | None:
    if isinstance(stmt, ast.Assign):
        if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        if stmt.target.id == name:
            return stmt.value
    return None


def class_assigns(cls: ClassInfo, name: str) -> ast.stmt | None:
    """The class-body statement that sets ``name`` (plain or annotated), if any."""
    for stmt in cls.node.body:
        if _class_assignment(stmt, name) is not None:
            return stmt
    return None


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):  # Generic[...] style bases
        return _last_name(node.value)
    return ""


def dotted(node: ast.expr) -> str:
    """``self.server.chat_completion`` for an attribute chain; ``super()`` for a super call."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}()"
    return "?"


def calls(node: ast.AST) -> Iterator[ast.Call]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            yield sub


def call_attr(call: ast.Call) -> str | None:
    """The last attribute or name called: ``chat_completion`` for ``a.b.chat_completion()``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def self_calls(func: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """``(name, call)`` for every ``self.name(...)`` in ``func``."""
    for call in calls(func):
        target = call.func
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            yield target.attr, call


def calls_chat_completion(func: ast.AST) -> ast.Call | None:
    """The first direct ``*.chat_completion(...)`` / ``*.completion(...)`` call, if any."""
    for call in calls(func):
        if call_attr(call) in {"chat_completion", "completion"} and isinstance(
            call.func, ast.Attribute
        ):
            return call
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def string_constants(node: ast.AST) -> Iterator[ast.Constant]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub


def docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (never a setting, never flagged)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | FunctionNode) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def bound_names(func: ast.AST, predicate) -> set[str]:
    """Names assigned (``x = …`` / ``x: T = …``) from a value for which ``predicate`` is true."""
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and predicate(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name) and predicate(node.value):
                names.add(node.target.id)
    return names


def enclosing_function_map(tree: ast.AST) -> dict[int, FunctionNode]:
    """id(node) -> the innermost function containing it."""
    out: dict[int, FunctionNode] = {}

    def visit(node: ast.AST, current: FunctionNode | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, FunctionNode) else current
            if inner is not None:
                out[id(child)] = inner
            visit(child, inner)

    visit(tree, None)
    return out


def is_plain_env(path: Path | str) -> bool:
    """True when the file is a plain atroposlib env (``EnvSource.plain``): the Hermes layer's
    rules are left out and rewards are judged by what any trainer needs."""
    try:
        return EnvSource(path).plain
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
