"""Which files a replay may run: environment files, found by reading them, never by running.

``hermes-replay replay`` runs the file a cassette's header names. A cassette is data from
outside (a pull request, an edit by hand), so its ``env_file`` is trusted only as far as this
module can see, *before anything is imported*, that the file defines an environment: a
class deriving from atroposlib's ``BaseEnv`` or ``HermesAgentBaseEnv`` — directly, through
another class of the same file, or through a class imported from a project module (whose
source is read the same way, a few levels deep). And it must not lie under a ``cassettes/``
folder, where files arrive with recordings rather than as the project's code. Anything else
(a build script, a ``.py`` dropped next to a cassette) is refused with the reason.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

__all__ = ["ENV_BASES", "NotAnEnvFile", "check_env_file", "env_classes"]

ENV_BASES = frozenset({"BaseEnv", "HermesAgentBaseEnv"})
_MAX_DEPTH = 3


class NotAnEnvFile(ValueError):
    """A file a replay refuses to run (see the module docstring)."""


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _module_file(module: str, level: int, here: Path, roots: list[Path]) -> Path | None:
    parts = module.split(".") if module else []
    bases = [here.parent.joinpath(*[".."] * (level - 1))] if level else \
        [*roots, *(Path(p) for p in sys.path if p and Path(p).is_dir())]
    for base in bases:
        for candidate in (base.joinpath(*parts).with_suffix(".py") if parts else None,
                          base.joinpath(*parts, "__init__.py")):
            if candidate is not None and candidate.is_file():
                return candidate.resolve()
    if level or not parts:
        return None
    # an installed package (``environments`` of this project, installed editable): every
    # import finder is asked where the top-level package lives — finders only look, so
    # nothing is imported (importlib.util.find_spec would return a namespace package that
    # shadows it, e.g. a tests/environments folder on sys.path)
    locations: list[str] = []
    for finder in sys.meta_path:
        try:
            spec = finder.find_spec(parts[0], None)  # type: ignore[attr-defined]
        except Exception:  # a third-party finder may fail in any way: just skip it
            continue
        if spec is None:
            continue
        if len(parts) == 1 and spec.origin and str(spec.origin).endswith(".py"):
            return Path(spec.origin).resolve()
        locations += list(spec.submodule_search_locations or [])
    for location in locations:
        for candidate in (Path(location).joinpath(*parts[1:]).with_suffix(".py"),
                          Path(location).joinpath(*parts[1:], "__init__.py")):
            if len(parts) > 1 and candidate.is_file():
                return candidate.resolve()
    return None


def env_classes(path: Path, roots: list[Path] | None = None, _depth: int = 0,
                _seen: dict[Path, list[str]] | None = None) -> list[str]:
    """Names of the environment classes ``path`` defines, or imports and runs with
    ``X.cli()`` (read, not imported)."""
    seen = _seen if _seen is not None else {}  # path -> its env classes (read once)
    path = path.resolve()
    if path in seen:
        return seen[path]  # [] while still being read: an import cycle
    if _depth > _MAX_DEPTH:
        return []
    seen[path] = []
    roots = roots if roots is not None else [path.parent]
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    imported: dict[str, tuple[str, int, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module or "", node.level,
                                                        alias.name)
    classes = {node.name: [b for b in map(_base_name, node.bases) if b]
               for node in tree.body if isinstance(node, ast.ClassDef)}
    known = set(ENV_BASES)
    resolved: dict[str, bool] = {}

    def is_env_base(name: str) -> bool:
        if name in known:
            return True
        if name in resolved:
            return resolved[name]
        resolved[name] = False
        if name in imported:
            module, level, original = imported[name]
            target = _module_file(module, level, path, roots)
            if target is not None and original in env_classes(target, roots, _depth + 1, seen):
                resolved[name] = True
        return resolved[name]

    found: list[str] = []
    # ``from environments.x import XEnv`` + ``XEnv.cli()``: an env file that runs an
    # environment class defined elsewhere (the class, read from its module, decides)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "cli" and isinstance(node.func.value, ast.Name):
            name = node.func.value.id
            if name not in classes and name not in found and is_env_base(name):
                found.append(name)
    changed = True
    while changed:  # a class may derive from one defined further down the file
        changed = False
        for name, bases in classes.items():
            if name not in found and any(is_env_base(b) or b in found for b in bases):
                found.append(name)
                known.add(name)
                changed = True
    seen[path] = found
    return found


def check_env_file(path: Path, project: Path | None = None) -> None:
    """Raise ``NotAnEnvFile`` unless ``path`` may be run by a replay."""
    project = (project or Path.cwd()).resolve()
    where = path.resolve()
    try:
        rel_parts = where.relative_to(project).parts
    except ValueError:
        rel_parts = where.parts[-2:]
    if "cassettes" in rel_parts[:-1]:
        raise NotAnEnvFile(
            f"{path} lies under a cassettes/ folder; replay runs only the project's own "
            "environment files, never a file that arrived with recordings. Next step: move "
            "the environment into the project (e.g. environments/) and re-record.")
    if where.suffix != ".py":
        raise NotAnEnvFile(f"{path} is not a Python file; an environment file is a .py that "
                           "defines a BaseEnv/HermesAgentBaseEnv subclass.")
    if not env_classes(where, roots=[project, where.parent]):
        raise NotAnEnvFile(
            f"{path} defines no environment class (no subclass of BaseEnv or "
            "HermesAgentBaseEnv found in its source), so replay refuses to run it: a "
            "cassette must not choose an arbitrary script. Next step: name the environment "
            "file yourself: hermes-replay replay ENV_FILE --cassette CASSETTE -- MODE …")
