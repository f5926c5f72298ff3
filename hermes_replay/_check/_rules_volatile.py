"""The clock, uuids and randomness that reach prompts: each one is a replay miss waiting.

A prompt built from ``datetime.now()`` differs a minute after it was recorded, one with a
``uuid4()`` on every run; replay matches requests, so both miss. Randomness is different:
replay seeds ``random`` (and numpy) before the environment starts, so draws in ``setup``
repeat — but a draw from the shared generator while rollouts run depends on their order, and a
``random.Random()``, ``SystemRandom`` or ``secrets`` value is never reproduced.

The paths that build prompts: ``format_prompt``, ``initial_messages``, ``get_next_item``, a
``system_prompt`` property and what each of those reaches; in a function that calls
``chat_completion`` itself (a judge), the values its ``messages=`` is built from; module- and
class-level values those read, a ``system_prompt=`` in ``config_init``, and ``self.X`` set
from such a value in ``setup`` and read on a prompt path.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hermes_replay._check._source import (
    ClassInfo,
    EnvSource,
    FunctionNode,
    calls,
    calls_chat_completion,
    dotted,
    keyword,
)
from hermes_replay._check._static import Emitter, rule

PROMPT_METHODS = ("format_prompt", "initial_messages", "get_next_item", "system_prompt",
                  "build_prompt", "make_prompt")

_CLOCK_FIX = ("keep a normalizer with the cassette so every replay matches it: `hermes-replay "
              "normalize CASSETTE --add {name}` (or record with `--normalize {name}`)")
_SEED_FIX = ("derive it from the item (e.g. `random.Random(item_fingerprint(item))` or "
             "`uuid.uuid5(NAMESPACE, key)`), or draw it in `setup`, which replay seeds")

# dotted call (its last two parts, or the name) -> (what it is, built-in normalizer or None)
_VOLATILE: dict[str, tuple[str, str | None]] = {
    "datetime.now": ("the wall clock", "datetime"),
    "datetime.utcnow": ("the wall clock", "datetime"),
    "datetime.today": ("today's date", "datetime"),
    "date.today": ("today's date", "datetime"),
    "time.time": ("the clock (seconds since the epoch)", "epoch"),
    "time.time_ns": ("the clock (nanoseconds since the epoch)", None),
    "time.strftime": ("the wall clock", "datetime"),
    "time.ctime": ("the wall clock", "datetime"),
    "time.asctime": ("the wall clock", "datetime"),
    "time.localtime": ("the wall clock", "datetime"),
    "time.gmtime": ("the wall clock", "datetime"),
    "uuid.uuid1": ("a new uuid on every run", "uuid"),
    "uuid.uuid4": ("a new uuid on every run", "uuid"),
    "uuid1": ("a new uuid on every run", "uuid"),
    "uuid4": ("a new uuid on every run", "uuid"),
    "os.urandom": ("random bytes replay cannot reproduce", None),
    "secrets.token_hex": ("a random token replay cannot reproduce", "hex-id"),
    "secrets.token_bytes": ("random bytes replay cannot reproduce", None),
    "secrets.token_urlsafe": ("a random token replay cannot reproduce", None),
    "secrets.choice": ("a random choice replay cannot reproduce", None),
    "secrets.randbelow": ("a random number replay cannot reproduce", None),
    "secrets.randbits": ("a random number replay cannot reproduce", None),
    "random.SystemRandom": ("OS randomness replay cannot reproduce", None),
}
_GLOBAL_RANDOM = {"random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
                  "uniform", "gauss", "getrandbits", "betavariate", "normalvariate"}


def _volatile(call: ast.Call) -> tuple[str, str, str | None] | None:
    """``(shown name, what it is, normalizer)`` for a call that differs run to run."""
    name = dotted(call.func)
    parts = name.split(".")
    for key in (".".join(parts[-2:]), parts[-1]):
        if key in _VOLATILE:
            if key.startswith("time.") and key != "time.time" and call.args:
                return None  # time.strftime(fmt, fixed_struct): not the clock
            what, normalizer = _VOLATILE[key]
            return name, what, normalizer
    if len(parts) >= 2 and parts[-2] == "random":
        if parts[-1] == "Random" and not call.args and not call.keywords:
            return name, "an unseeded generator replay cannot reproduce", None
        if parts[-1] in _GLOBAL_RANDOM:  # (np.random.* too: the shared global generator)
            return name, ("a draw from the shared generator, which depends on the order "
                          "rollouts reach it"), None
    return None


def _report(out: Emitter, call: ast.Call, where: str, found: tuple[str, str, str | None]
            ) -> None:
    name, what, normalizer = found
    fix = _CLOCK_FIX.format(name=normalizer) if normalizer else _SEED_FIX
    if normalizer and normalizer != "datetime":
        fix += "; or " + _SEED_FIX
    out.warn(call, f"`{name}()` in {where} puts {what} into a prompt: a replay sends another "
             "request than the recording and misses", fix)


def _prompt_roots(src: EnvSource, cls: ClassInfo) -> Iterator[FunctionNode]:
    """The methods whose whole work is a prompt (``format_prompt`` …)."""
    for name in PROMPT_METHODS:
        found = src.lookup(cls, name)
        if found is not None:
            yield found


def _message_flow(func: FunctionNode) -> list[ast.AST]:
    """In a function that calls ``chat_completion`` itself (a judge, a loop of its own): the
    ``messages=`` expressions and the assignments of the names they use, transitively — the
    values that become its prompt (a ``time.time()`` that times the call is not one)."""
    exprs: list[ast.AST] = []
    for call in calls(func):
        if calls_chat_completion(call) is call:
            msgs = keyword(call, "messages") or keyword(call, "prompt")
            if msgs is not None:
                exprs.append(msgs.value)
    wanted = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
    assigns = [node for node in ast.walk(func) if isinstance(node, ast.Assign | ast.AnnAssign)
               and node.value is not None]
    taken: list[ast.AST] = []
    done: set[int] = set()  # the assignments already taken (each once: the loop then ends)
    grew = True
    while grew:
        grew = False
        for node in assigns:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & wanted and id(node) not in done:
                done.add(id(node))
                taken.append(node.value)
                wanted |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                grew = True
    return exprs + taken


def _reads_self(funcs: list[FunctionNode]) -> set[str]:
    return {node.attr for func in funcs for node in ast.walk(func)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self" and isinstance(node.ctx, ast.Load)}


def _setup_values(src: EnvSource, cls: ClassInfo) -> Iterator[tuple[str, ast.Call]]:
    """``(attr, call)`` for ``self.attr = …volatile call…`` in ``setup`` (and what it calls)."""
    setup = src.lookup(cls, "setup")
    if setup is None:
        return
    for func in src.closure(cls, setup):
        for node in ast.walk(func):
            if not isinstance(node, ast.Assign):
                continue
            attrs = [t.attr for t in node.targets if isinstance(t, ast.Attribute)
                     and isinstance(t.value, ast.Name) and t.value.id == "self"]
            for call in calls(node.value):
                found = _volatile(call)
                if attrs and found is not None and "shared generator" not in found[1]:
                    yield from ((a, call) for a in attrs)


@rule(
    "volatile-prompt",
    "no clock, uuid or unseeded random value reaches a prompt",
    "keep a normalizer with the cassette (`hermes-replay normalize CASSETTE --add datetime`) "
    "for a clock or uuid, or derive the value from the item / draw it in setup",
)
def volatile_prompt(src: EnvSource, out: Emitter) -> None:
    seen: set[int] = set()

    def report(call: ast.Call, where: str) -> None:
        found = _volatile(call)
        if found is not None and id(call) not in seen:
            seen.add(id(call))
            _report(out, call, where, found)

    names: set[str] = set()  # module names and attributes read where prompts are built
    for cls in src.classes.values():
        path: list[FunctionNode] = []
        for root in _prompt_roots(src, cls):
            for func in src.closure(cls, root, stop=("setup",)):
                if all(func is not f for f in path):
                    path.append(func)
        flows: list[tuple[FunctionNode, ast.AST]] = []
        for func in cls.methods.values():
            if func.name != "setup" and all(func is not f for f in path) and \
                    calls_chat_completion(func) is not None:
                flows += [(func, expr) for expr in _message_flow(func)]
                for name, _ in ((c.func.attr, c) for e in _message_flow(func) for c in calls(e)
                                if isinstance(c.func, ast.Attribute)
                                and isinstance(c.func.value, ast.Name)
                                and c.func.value.id == "self"):
                    helper = src.lookup(cls, name)  # a helper that builds part of the prompt
                    if helper is not None:
                        path += [f for f in src.closure(cls, helper, stop=("setup",))
                                 if all(f is not p for p in path)]
        for func in path:
            for call in calls(func):
                report(call, f"{func.name}()")
        for func, expr in flows:
            for call in calls(expr):
                report(call, f"the prompt {func.name}() sends")
        read = _reads_self(path) | {n.attr for _, e in flows for n in ast.walk(e)
                                    if isinstance(n, ast.Attribute)}
        names |= read | {n.id for f in [*path, *(e for _, e in flows)] for n in ast.walk(f)
                         if isinstance(n, ast.Name)}
        for attr, call in _setup_values(src, cls):
            if attr in read:
                report(call, f"setup() (as self.{attr}, read where prompts are built)")
        config = src.lookup(cls, "config_init")
        for call in calls(config) if config is not None else ():
            prompt = keyword(call, "system_prompt")
            for inner in calls(prompt.value) if prompt is not None else ():
                report(inner, "config_init()'s system_prompt")
    # module- and class-level values, computed once at import, that a prompt path reads
    for body in [src.tree.body, *(c.node.body for c in src.classes.values())]:
        for stmt in body:
            if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                for call in calls(stmt.value):
                    report(call, "a value computed at import")
