"""Rules about how an environment runs, scores and logs rollouts.

Each function is one pitfall from the seed's list; the docstring says what breaks at run time.
"""

from __future__ import annotations

import ast

from hermes_replay._check._source import (
    ClassInfo,
    EnvSource,
    FunctionNode,
    bound_names,
    call_attr,
    calls,
    calls_chat_completion,
    dotted,
    keyword,
    self_calls,
)
from hermes_replay._check._static import Emitter, rule

RESULT_FIELDS = ("final_response", "tool_calls", "tools_used")
# Local names that, when ``await NAME.run(...)`` is assigned, are the agent loop.
_LOOP_NAMES = {"agent", "loop", "agent_loop"}
# Base-class methods that run whole rollouts (agent loop + compute_reward) for the caller.
# (environments/hermes_base_env.py: ``rollout``, ``run_eval_rollouts``, ``collect_trajectory*``.)
ROLLOUT_RUNNERS = {"rollout", "run_eval_rollouts", "collect_trajectory", "collect_trajectories"}


def _is_agent_loop_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (call_attr(node) or "").endswith("AgentLoop")


def _agent_result_names(func: FunctionNode) -> set[str]:
    """Names in ``func`` that hold an AgentResult."""
    names: set[str] = set()
    params = [*func.args.posonlyargs, *func.args.args]
    for arg in params + func.args.kwonlyargs:
        if arg.annotation is not None and dotted(arg.annotation).endswith("AgentResult"):
            names.add(arg.arg)
    if func.name == "compute_reward":
        # compute_reward(self, item, result, ctx): the third positional is the AgentResult.
        if len(params) >= 3 and params[0].arg in {"self", "cls"}:
            names.add(params[2].arg)
    loops = bound_names(func, _is_agent_loop_call)

    def is_run(value: ast.AST) -> bool:
        if not (isinstance(value, ast.Await) and isinstance(value.value, ast.Call)):
            return False
        target = value.value.func
        if not (isinstance(target, ast.Attribute) and target.attr == "run"):
            return False
        owner = target.value
        return _is_agent_loop_call(owner) or (
            isinstance(owner, ast.Name) and (owner.id in loops or owner.id in _LOOP_NAMES)
        )

    return names | bound_names(func, is_run)


@rule(
    "result-fields",
    "AgentResult is read through .messages (no final_response / tool_calls / tools_used)",
    "walk `reversed(result.messages)`: the last assistant message with content is the final "
    "response; tool names are in that message's `tool_calls`",
    hermes_only=True,
)
def agent_result_fields(src: EnvSource, out: Emitter) -> None:
    """AgentResult has no such attributes: the line raises AttributeError in every rollout."""
    for func in src.functions():
        names = _agent_result_names(func)
        if not names:
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id in names and node.attr in RESULT_FIELDS:
                    out.fail(node, f"`{node.value.id}.{node.attr}` in {func.name}(): AgentResult "
                             f"has no `{node.attr}`, so this raises AttributeError")
                elif node.value.id in names and node.attr == "get":
                    out.fail(node, f"`{node.value.id}.get(...)` in {func.name}(): AgentResult is "
                             "a dataclass, not a dict")
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                key = node.slice
                if node.value.id in names and isinstance(key, ast.Constant) and isinstance(
                    key.value, str
                ):
                    out.fail(node, f"`{node.value.id}[{key.value!r}]` in {func.name}(): "
                             "AgentResult is a dataclass, not a dict")
            elif isinstance(node, ast.Call) and call_attr(node) in {"getattr", "hasattr"}:
                args = node.args
                if (len(args) >= 2 and isinstance(args[0], ast.Name) and args[0].id in names
                        and isinstance(args[1], ast.Constant) and args[1].value in RESULT_FIELDS):
                    out.fail(node, f"`{call_attr(node)}({args[0].id}, {args[1].value!r})` in "
                             f"{func.name}(): AgentResult never has `{args[1].value}`, so this "
                             "always takes the fallback")


def _judges(src: EnvSource, cls: ClassInfo) -> set[str]:
    """Methods reached from compute_reward that call the model themselves (LLM judges)."""
    reward = src.lookup(cls, "compute_reward")
    if reward is None:
        return set()
    return {
        f.name for f in src.closure(cls, reward)
        if f is not reward and calls_chat_completion(f) is not None
    }


def _agent_loop_calls(funcs: list[FunctionNode]) -> list[ast.Call]:
    return [c for f in funcs for c in calls(f) if _is_agent_loop_call(c)]


@rule(
    "eval-agent-loop",
    "evaluate() runs HermesAgentLoop with tools, not a bare chat_completion",
    "build `HermesAgentLoop(server=self.server, tool_schemas=tools, valid_tool_names=names, ...)` "
    "with `tools, names = self._resolve_tools_for_group()` and score `await loop.run(messages)` "
    "with compute_reward",
    hermes_only=True,
)
def evaluate_runs_agent_loop(src: EnvSource, out: Emitter) -> None:
    """A one-shot chat_completion in evaluate measures a model without tools: not the task."""
    for cls, evaluate in src.methods_named("evaluate"):
        funcs = src.closure(cls, evaluate, stop={"compute_reward"} | _judges(src, cls))
        loops = _agent_loop_calls(funcs)
        runners = [c for f in funcs for n, c in self_calls(f) if n in ROLLOUT_RUNNERS]
        if not loops and not runners:
            for func in funcs:
                call = calls_chat_completion(func)
                if call is not None:
                    out.fail(call, f"evaluate() calls `{dotted(call.func)}` directly (in "
                             f"{func.name}): a single completion with no tools, not the agent "
                             "loop the environment trains")
                    break
        for loop in loops:
            tools = keyword(loop, "tool_schemas")
            value = tools.value if tools else (loop.args[1] if len(loop.args) > 1 else None)
            if value is None or (isinstance(value, ast.Constant) and value.value is None) or (
                isinstance(value, ast.List) and not value.elts
            ):
                out.fail(loop, "evaluate() runs the agent loop with no tool schemas: the model "
                         "cannot call a tool during evaluation")


def _is_super_wandb_log(call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "wandb_log"):
        return False
    owner = func.value
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name):
        return owner.func.id == "super"
    # BaseClass.wandb_log(self, ...) — an explicit base call, not self.wandb_log (recursion).
    return isinstance(owner, ast.Name | ast.Attribute) and dotted(owner) != "self"


def _is_base_wandb_helper(call: ast.Call) -> bool:
    """``_base_wandb_log(self, metrics)``: a module helper that calls the base for ``self``."""
    return (isinstance(call.func, ast.Name) and "wandb_log" in call.func.id and bool(call.args)
            and isinstance(call.args[0], ast.Name) and call.args[0].id == "self")


@rule(
    "wandb-super",
    "wandb_log() awaits super().wandb_log(...)",
    "end wandb_log with `await super().wandb_log(wandb_metrics)`",
)
def wandb_log_calls_super(src: EnvSource, out: Emitter) -> None:
    """Without the super call no metric (and no tool-error metric of the base class) is logged."""
    for _cls, method in src.methods_named("wandb_log"):
        supers = [c for c in calls(method)
                  if _is_super_wandb_log(c) or _is_base_wandb_helper(c)]
        if not supers:
            out.fail(method, "wandb_log() never calls super().wandb_log(...): the base class "
                     "never sends these metrics (or its own tool-error metrics) to wandb")
            continue
        if isinstance(method, ast.AsyncFunctionDef):
            awaited = {id(n.value) for n in ast.walk(method) if isinstance(n, ast.Await)}
            for call in supers:
                if id(call) not in awaited:
                    out.fail(call, "super().wandb_log(...) is called but not awaited: the "
                             "coroutine never runs, so nothing is logged",
                             "write `await super().wandb_log(wandb_metrics)`")


def _parents(func: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(func) for child in ast.iter_child_nodes(node)}


def _in_finally(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    child, parent = node, parents.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.Try | ast.TryStar) and any(child is s for s in parent.finalbody):
            return True
        child, parent = parent, parents.get(id(parent))
    return False


@rule(
    "ctx-cleanup",
    "every ToolContext is cleaned up in a finally (or used with `with`)",
    "use `with ToolContext(task_id) as ctx:` (or `async with`), or `ctx = ToolContext(task_id)` "
    "then `try: reward = await self.compute_reward(item, result, ctx)` / `finally: ctx.cleanup()`",
    hermes_only=True,
)
def tool_context_cleanup(src: EnvSource, out: Emitter) -> None:
    """A reward that raises before cleanup() leaves the rollout's sandbox behind."""
    for func in src.functions():
        parents = _parents(func)
        with_exprs = {
            id(item.context_expr)
            for node in ast.walk(func) if isinstance(node, ast.With | ast.AsyncWith)
            for item in node.items
        }
        for call in calls(func):
            if call_attr(call) != "ToolContext" or id(call) in with_exprs:
                continue
            parent = parents.get(id(call))
            targets = []
            if isinstance(parent, ast.Assign):
                targets = [t.id for t in parent.targets if isinstance(t, ast.Name)]
            elif isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name):
                targets = [parent.target.id]
            if not targets:
                out.fail(call, f"ToolContext(...) in {func.name}() is never cleaned up: nothing "
                         "holds it to call cleanup(), so its sandbox leaks")
                continue
            _check_cleanup(func, targets[0], call, parents, with_exprs, out)


def _check_cleanup(func: FunctionNode, name: str, call: ast.Call, parents: dict[int, ast.AST],
                   with_exprs: set[int], out: Emitter) -> None:
    used_as_cm = any(
        isinstance(node, ast.Name) and node.id == name and id(node) in with_exprs
        for node in ast.walk(func)
    )
    if used_as_cm:
        return
    cleanups = [
        c for c in calls(func)
        if isinstance(c.func, ast.Attribute) and c.func.attr in {"cleanup", "acleanup"}
        and isinstance(c.func.value, ast.Name) and c.func.value.id == name
    ]
    # A helper that gets the context inside a finally (``finally: await _cleanup(ctx)``).
    handed_over = [
        c for c in calls(func)
        if any(isinstance(a, ast.Name) and a.id == name for a in c.args)
        and _in_finally(c, parents)
    ]
    if handed_over:
        return
    if not cleanups:
        out.fail(call, f"`{name} = ToolContext(...)` in {func.name}() is never cleaned up: the "
                 "rollout's sandbox (files, processes) outlives it")
    elif not any(_in_finally(c, parents) for c in cleanups):
        out.fail(cleanups[0], f"`{name}.cleanup()` in {func.name}() is not in a finally: when "
                 "compute_reward (or anything before it) raises, the sandbox leaks")


def _mentions_tool_calls(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "tool_calls":
            return True
        if isinstance(sub, ast.Constant) and sub.value == "tool_calls":
            return True
        if isinstance(sub, ast.Name) and "tool_call" in sub.id:
            return True
    return False


def _function_access(node: ast.AST) -> tuple[ast.expr, str] | None:
    """``(owner, style)`` if ``node`` reads ``function`` off a tool call; style is dict/object."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        if node.slice.value == "function":
            return node.value, "dict"
    if isinstance(node, ast.Attribute) and node.attr == "function":
        return node.value, "object"
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        if node.args[0].value == "function" and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get":
                return node.func.value, "dict.get"
    if isinstance(node, ast.Call) and call_attr(node) == "getattr" and len(node.args) >= 2:
        arg = node.args[1]
        if isinstance(arg, ast.Constant) and arg.value == "function":
            return node.args[0], "getattr"
    return None


def _sdk_source(node: ast.AST) -> bool:
    """Tool calls read off an SDK response (``resp.choices[0].message.tool_calls``): objects."""
    return any(isinstance(sub, ast.Attribute) and sub.attr in {"choices", "tool_calls"}
               for sub in ast.walk(node))


@rule(
    "tool-call-shape",
    "tool calls read from messages handle both dicts and objects",
    "`fn = tc.get(\"function\", {}) if isinstance(tc, dict) else getattr(tc, \"function\", None)`"
    " — then read name/arguments the same way",
    hermes_only=True,
)
def tool_call_shape(src: EnvSource, out: Emitter) -> None:
    """Tool calls come as dicts (AgentResult.messages) or SDK objects (a raw chat response).

    Severity follows what really happens here: the agent loop normalises the calls in
    ``result.messages`` to dicts, so dict-only code is a warning there (it breaks on messages
    built elsewhere); object-only code on those dicts, or dict access on an SDK response, raises.
    """
    for func in src.functions():
        loop_vars: dict[str, bool] = {}  # name -> iterates an SDK response's calls
        for node in ast.walk(func):
            if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                if isinstance(node.target, ast.Name) and _mentions_tool_calls(node.iter):
                    loop_vars[node.target.id] = _sdk_source(node.iter)
        guarded = {
            node.args[0].id for node in calls(func)
            if call_attr(node) in {"isinstance", "hasattr"} and node.args
            and isinstance(node.args[0], ast.Name)
        }
        styles: dict[str, set[str]] = {}
        hits: list[tuple[ast.AST, str, str, bool]] = []
        for node in ast.walk(func):
            access = _function_access(node)
            if access is None:
                continue
            owner, style = access
            if isinstance(owner, ast.Name) and owner.id in loop_vars:
                styles.setdefault(owner.id, set()).add(style)
                hits.append((node, owner.id, style, loop_vars[owner.id]))
            elif isinstance(owner, ast.Subscript) and _mentions_tool_calls(owner.value):
                if not guarded:
                    hits.append((node, "", style, _sdk_source(owner.value)))
        for node, var, style, sdk in sorted(hits, key=lambda h: h[0].lineno):
            if var and (var in guarded or {"dict.get", "getattr"} <= styles[var]):
                continue
            text = ast.get_source_segment(src.text, node) or "tool call"
            as_dicts = style in {"dict", "dict.get"}
            if as_dicts and sdk:
                out.fail(node, f"`{text}` in {func.name}() reads an SDK response's tool calls "
                         "as dicts: they are ChatCompletionMessageToolCall objects, so this "
                         "raises TypeError")
            elif not as_dicts and not sdk:
                out.fail(node, f"`{text}` in {func.name}() reads tool calls as objects, but "
                         "the agent loop stores them in messages as dicts, so this raises "
                         "AttributeError")
            elif as_dicts:
                out.warn(node, f"`{text}` in {func.name}() assumes tool calls are dicts: true "
                         "for AgentResult.messages, but messages built elsewhere (SDK "
                         "responses, other loops) carry objects and this line then raises")
            else:
                out.warn(node, f"`{text}` in {func.name}() assumes tool calls are objects: "
                         "true for an SDK response, but dict-shaped messages then raise")
            break
