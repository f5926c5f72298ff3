"""Which files a replay may run: environment files, found by reading them, never by running.

``hermes-replay replay`` runs the file a cassette's header names. A cassette is data from
outside (a pull request, an edit by hand), so its ``env_file`` is trusted only as far as this
module can see, *before anything is imported*, that the file defines an environment: a class
whose base resolves, import by import through the project's own modules, to the ``BaseEnv``
defined in atroposlib's installed ``envs/base.py`` (``HermesAgentBaseEnv`` qualifies because
its source says so). A class merely named ``BaseEnv`` does not. The file must not lie under a
``cassettes/`` folder either (``_plan.find_env_file`` also refuses every folder that holds the
cassette). Anything else (a build script, a ``.py`` dropped next to a cassette) is refused with
the reason.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from hermes_replay._pyast import parse

__all__ = ["ENV_BASES", "NotAnEnvFile", "check_env_file", "env_classes"]

ENV_BASES = frozenset({"BaseEnv", "HermesAgentBaseEnv"})  # the names users know (docs, errors)
_MAX_DEPTH = 4
_ATROPOS_BASE = ("atroposlib.envs.base", "BaseEnv")  # the one root every environment derives from


class NotAnEnvFile(ValueError):
    """A file a replay refuses to run (see the module docstring)."""


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.C`` (or ``a.b.C[T]``) as its parts; None for anything computed."""
    if isinstance(node, ast.Subscript):
        node = node.value
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _installed_file(module: str) -> Path | None:
    """Where an installed module's source lies, asked of the import finders only (never of
    the project's folders, so a planted ``atroposlib/`` beside a file cannot pose as the real
    one). Finders only look: nothing is imported (importlib.util.find_spec would import the
    parents, and could return a namespace package that shadows the real one)."""
    parts = module.split(".")
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
    return _installed_file(module)


# Parsed files, kept across replays in one process (a worker replaying a corpus, ``watch``,
# the pytest plugin): every replay parsed atroposlib's 1,700-line ``envs/base.py`` again, about
# a tenth of a small replay's time. Keyed by the text itself, not by a modification time (two
# saves within one clock tick look alike): reading a file is cheap, parsing it is not; an
# edited file is parsed again. The trees are only read, never changed.
_PARSED: dict[Path, tuple[str, ast.Module | None]] = {}
_PARSED_LIMIT = 512


def _parsed(path: Path) -> ast.Module | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    kept = _PARSED.get(path)
    if kept is not None and kept[0] == text:
        return kept[1]
    try:
        tree: ast.Module | None = parse(text, str(path))
    except (SyntaxError, ValueError):
        tree = None
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.clear()
    _PARSED[path] = (text, tree)
    return tree


class _Reader:
    """Reads source files (never runs them) to decide which of their classes derive from
    atroposlib's real ``BaseEnv``: a class counts only when its base resolves, import by
    import, to the class ``BaseEnv`` defined in atroposlib's own ``envs/base.py``. A class
    merely *named* ``BaseEnv`` (``class BaseEnv: pass`` in a planted file) is not it."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.base_file = _installed_file(_ATROPOS_BASE[0])
        self._trees: dict[Path, ast.Module | None] = {}
        self._classes: dict[tuple[Path, str], bool] = {}

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            self._trees[path] = _parsed(path)
        return self._trees[path]

    def is_env_class(self, path: Path, name: str, depth: int = 0) -> bool:
        """Whether ``name``, as bound at the top level of ``path``, is an env class."""
        key = (path, name)
        if key in self._classes:
            return self._classes[key]  # False while still being read: an import cycle
        self._classes[key] = False
        if path == self.base_file and name == _ATROPOS_BASE[1]:
            self._classes[key] = True
            return True
        if depth > _MAX_DEPTH:
            return False
        tree = self.tree(path)
        if tree is None:
            return False
        result = False
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                result = any(self.resolves(path, parts, depth)
                             for parts in map(_dotted, node.bases) if parts)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = _module_file(node.module or "", node.level, path, self.roots)
                        result = target is not None and self.is_env_class(
                            target, alias.name, depth + 1)
        self._classes[key] = result
        return result

    def resolves(self, path: Path, parts: list[str], depth: int) -> bool:
        """Whether the dotted name ``parts`` used in ``path`` is an env class."""
        if len(parts) == 1:
            return self.is_env_class(path, parts[0], depth)
        tree = self.tree(path)
        module: str | None = None
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.Import):  # import a.b / import a.b as m
                for alias in node.names:
                    if alias.asname == parts[0]:
                        module = alias.name
                    elif alias.asname is None and alias.name.split(".")[0] == parts[0]:
                        module = parts[0]
            elif isinstance(node, ast.ImportFrom):  # from a import b (a module)
                for alias in node.names:
                    if (alias.asname or alias.name) == parts[0] and node.level == 0:
                        module = f"{node.module}.{alias.name}" if node.module else alias.name
        if module is None:
            return False
        dotted = ".".join([module, *parts[1:-1]])
        target = _module_file(dotted, 0, path, self.roots)
        return target is not None and self.is_env_class(target, parts[-1], depth + 1)


def env_classes(path: Path, roots: list[Path] | None = None) -> list[str]:
    """Names of the environment classes ``path`` defines, or imports and runs with
    ``X.cli()`` (read, not imported)."""
    path = path.resolve()
    reader = _Reader(roots if roots is not None else [path.parent])
    tree = reader.tree(path)
    if tree is None:
        return []
    found: list[str] = []
    # ``from environments.x import XEnv`` + ``XEnv.cli()``: an env file that runs an
    # environment class defined elsewhere (the class, read from its module, decides)
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "cli" and isinstance(node.func.value, ast.Name):
            name = node.func.value.id
            if name not in defined and name not in found and reader.is_env_class(path, name):
                found.append(name)
    found += [node.name for node in tree.body if isinstance(node, ast.ClassDef)
              and reader.is_env_class(path, node.name)]
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
