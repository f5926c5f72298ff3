"""Rules about what evaluation does to training metrics and to the judge bill.

``eval-buffers`` mirrors what the base class really protects (``environments/_metrics.py``):
around ``evaluate`` it guards every instance attribute named in the class variable
``metric_buffers``, and every attribute whose name ends in ``_buffer`` *if it has a length*
(lists, dicts, deques). A scalar counter named ``*_buffer`` is therefore not protected unless it
is listed in ``metric_buffers``; this rule warns about exactly the writes that stay unprotected.
"""

from __future__ import annotations

import ast

from hermes_replay._check._rules_agent import ROLLOUT_RUNNERS, _judges
from hermes_replay._check._source import ClassInfo, EnvSource, FunctionNode, self_calls
from hermes_replay._check._static import Emitter, rule

_MUTATORS = {"append", "extend", "insert", "add", "update", "appendleft", "setdefault"}


def _self_attr(node: ast.AST) -> str | None:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self"):
        return node.attr
    return None


def _owner_attr(node: ast.AST) -> str | None:
    """``X`` for ``self.X`` or ``self.X[...]``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return _self_attr(node)


def buffer_writes(funcs: list[FunctionNode]) -> dict[str, tuple[ast.AST, bool]]:
    """``{attr: (first write, is_scalar)}`` for metric-like writes to ``self.attr``."""
    found: dict[str, tuple[ast.AST, bool]] = {}

    def note(name: str | None, node: ast.AST, scalar: bool) -> None:
        if name and name not in found:
            found[name] = (node, scalar)

    for func in funcs:
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _MUTATORS:
                    note(_owner_attr(node.func.value), node, False)
            elif isinstance(node, ast.AugAssign):
                if isinstance(node.target, ast.Subscript):
                    note(_owner_attr(node.target), node, False)
                else:
                    listy = isinstance(node.value, ast.List | ast.ListComp | ast.Tuple)
                    note(_self_attr(node.target), node, not listy)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        note(_owner_attr(target), node, False)
    return found


def _restored_in(funcs: list[FunctionNode]) -> tuple[set[str], bool]:
    """Attributes evaluate rebinds, slices back or deletes from; and whether it uses setattr."""
    names: set[str] = set()
    generic = False
    for func in funcs:
        for node in ast.walk(func):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                generic = generic or (node.func.id == "setattr" and bool(node.args)
                                      and isinstance(node.args[0], ast.Name)
                                      and node.args[0].id == "self")
            for target in targets:
                if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice):
                    continue
                name = _owner_attr(target)
                if name:
                    names.add(name)
    return names, generic


def _evaluate_scores(src: EnvSource, cls: ClassInfo, evaluate: FunctionNode) -> bool:
    """Does evaluate reach compute_reward (itself, or through a base-class rollout runner)?"""
    funcs = src.closure(cls, evaluate, stop={"compute_reward"})
    return any(
        name == "compute_reward" or name in ROLLOUT_RUNNERS
        for func in funcs for name, _call in self_calls(func)
    )


@rule(
    "eval-buffers",
    "training metric buffers written in compute_reward are protected during evaluate",
    "name the attribute `<something>_buffer` (a list or dict) or list it in the class variable "
    "`metric_buffers = (\"...\",)`; the base class then keeps evaluate's writes out of it",
    hermes_only=True,
)
def eval_buffers(src: EnvSource, out: Emitter) -> None:
    """compute_reward runs in evaluate too; unprotected buffers mix eval into train/* metrics."""
    for cls, reward in src.methods_named("compute_reward"):
        evaluate = src.lookup(cls, "evaluate")
        if evaluate is None or not _evaluate_scores(src, cls, evaluate):
            continue
        declared = src.class_constant_strings(cls, "metric_buffers") or set()
        restored, generic = _restored_in(src.closure(cls, evaluate, stop={"compute_reward"}))
        if generic:
            continue
        for name, (node, scalar) in buffer_writes(src.closure(cls, reward)).items():
            if name in declared or name in restored:
                continue
            if name.endswith("_buffer") and not scalar:
                continue
            why = ("a scalar counter is not protected by its `_buffer` name"
                   if name.endswith("_buffer") else "the base class does not know it is a buffer")
            out.warn(node, f"compute_reward writes `self.{name}`, and evaluate() also scores "
                     f"rollouts: eval results leak into the training metrics ({why})",
                     f"add {name!r} to the class variable `metric_buffers` (or rename it to end "
                     "in `_buffer` if it is a list or dict); the base class then restores it "
                     "around evaluate")


@rule(
    "judge-once",
    "an LLM judge called by compute_reward is not called again in evaluate",
    "let compute_reward store the judge's score (e.g. in a `*_buffer` or on the sample) and read "
    "it in evaluate instead of calling the judge a second time",
    hermes_only=True,
)
def judge_once(src: EnvSource, out: Emitter) -> None:
    """Judging the same rollout twice doubles the judge's cost and can disagree with itself."""
    for cls, evaluate in src.methods_named("evaluate"):
        judges = _judges(src, cls)
        if not judges:
            continue
        funcs = src.closure(cls, evaluate, stop={"compute_reward"} | judges)
        if not any(name == "compute_reward" or name in ROLLOUT_RUNNERS
                   for f in funcs for name, _c in self_calls(f)):
            continue
        for func in funcs:
            for name, call in self_calls(func):
                if name in judges:
                    out.warn(call, f"evaluate() calls the judge `self.{name}` in {func.name}() "
                             "and also calls compute_reward, which already runs it: every eval "
                             "rollout is judged twice")

