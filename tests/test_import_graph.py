"""The dependency graph of the two packages, read from their source (nothing is imported):

- ``environments`` uses only the public API of ``hermes_replay`` (no ``hermes_replay._x``);
- ``hermes_replay`` never imports ``environments``;
- neither package has an import cycle among its own modules, counting imports under
  ``if TYPE_CHECKING:`` too (a cycle for the type checker is still a tangle for a reader);
- ``hermes_replay``'s rooms (subpackages, see ARCHITECTURE.md) form layers: a module imports
  only from its own room and the rooms below it (``LAYERS``), never upward.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hermes_replay", "environments")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports: function-local, TYPE_CHECKING and
    ``importlib.import_module("literal")`` imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)  # importlib.import_module("a.b"): an import too
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


def test_environments_use_only_the_public_api_of_hermes_replay() -> None:
    bad = sorted(f"{m} imports {t}" for m, ts in GRAPH.items() if m.startswith("environments")
                 for t in ts if t.split(".")[0] == "hermes_replay" and _private(t))
    assert bad == []


def test_hermes_replay_never_imports_environments() -> None:
    bad = sorted(f"{m} imports {t}" for m, ts in GRAPH.items() if m.startswith("hermes_replay")
                 for t in ts if t.split(".")[0] == "environments")
    assert bad == []


def _cycles(package: str) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), inside ``package``.

    The top-level ``__init__`` is left out as a target: a module reaching the public API with a
    function-local ``import hermes_replay`` does not make the facade part of a cycle."""
    nodes = [m for m in GRAPH if m.split(".")[0] == package]
    edges = {m: sorted(t for t in GRAPH[m] if t in MODULES and t.split(".")[0] == package
                       and t != package) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in nodes:
        if v not in index:
            strong(v)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_inside(package: str) -> None:
    assert _cycles(package) == []


# hermes_replay's rooms, lowest first. A module of a room may import its own room and any room
# listed before it. The facade ``hermes_replay`` itself is not a room: low modules reach the
# public API lazily inside functions (``from hermes_replay import __version__``), which the
# cycle check above already allows.
LAYERS: list[tuple[str, ...]] = [
    # the foundation: no package imports
    ("_errors", "_active", "tool_formats", "_pyast", "_layer", "_interpreter"),
    ("_secrets",),
    ("_tokenizers",),
    ("_terminal",),
    ("_cassette",),
    ("_world",),
    ("_session",),
    ("scripted_endpoint",),
    ("_runner",),
    ("_fork",),
    ("_diff",),
    ("_report",),
    ("_check",),
    ("probe",),
    ("_corpus",),
    ("_cli",),
    ("cli", "pytest_plugin", "snapshot"),          # the top: entry points and extensions
]
_RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def _room(module: str) -> str | None:
    """The room of ``hermes_replay.<room>[.…]``; None for the facade and other packages."""
    parts = module.split(".")
    if parts[0] != "hermes_replay" or len(parts) < 2:
        return None
    return parts[1]


def test_every_module_of_hermes_replay_lives_in_a_declared_room() -> None:
    rooms = {_room(m) for m in MODULES if m.startswith("hermes_replay.")}
    assert sorted(r for r in rooms if r not in _RANK) == []


def test_rooms_import_only_downward() -> None:
    upward = sorted(
        f"{m} imports {t} ({_room(m)} may not reach up to {_room(t)})"
        for m, targets in GRAPH.items() if _room(m) in _RANK
        for t in targets if _room(t) in _RANK and _RANK[_room(t)] > _RANK[_room(m)]
    )
    assert upward == []


def test_the_layer_check_sees_an_upward_import() -> None:
    """The layering test would pass if ``_room`` or the ranks were wrong; prove it can fail."""
    assert _RANK[_room("hermes_replay._secrets.redact")] < _RANK[_room("hermes_replay._cli.ls")]
    assert "hermes_replay._secrets.rules" in GRAPH["hermes_replay._secrets.redact"]
    assert _room("hermes_replay") is None and _room("environments.agent_loop") is None


def test_the_graph_is_read_at_all() -> None:
    """The checks above would pass on an empty graph; make sure they see the real one."""
    assert len(MODULES) > 80
    assert "hermes_replay._active" in GRAPH["hermes_replay._session.scope"]
    assert "hermes_replay" in GRAPH["environments._rollout"]
    assert _private("hermes_replay._session.scope") and not _private("hermes_replay.tool_formats")
    generic = GRAPH["hermes_replay.scripted_endpoint.scripts.generic"]
    assert "hermes_replay.scripted_endpoint._script" in generic


# The command line parses and presents; replaying a set of cassettes (pools, Ray, shards, the
# manifest) is the ``_corpus`` room's, reachable from Python as ``replay_corpus``.
_CONCURRENCY = ("multiprocessing", "concurrent.futures", "ray")
CLI_LINES = 3000


def test_the_cli_runs_no_processes_or_clusters_itself() -> None:
    found = sorted(f"{m} imports {t}" for m, ts in GRAPH.items()
                   if m.startswith("hermes_replay._cli") for t in ts
                   if any(t == c or t.startswith(c + ".") for c in _CONCURRENCY))
    assert found == []
    # the check sees such an import where there is one
    assert "multiprocessing" in GRAPH["hermes_replay._corpus.processes"]
    assert any(t == "ray" for t in GRAPH["hermes_replay._corpus.on_ray"])


def test_the_cli_stays_parsing_and_presentation() -> None:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines())
                for m, p in MODULES.items() if m.startswith("hermes_replay._cli"))
    assert lines < CLI_LINES, (f"hermes_replay/_cli/ holds {lines} lines: move the work into "
                               "the room it belongs to (ARCHITECTURE.md)")
