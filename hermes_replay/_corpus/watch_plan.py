"""What ``hermes-replay watch`` watches, and which cassettes a save affects.

- The cassettes: a folder's, one file, or those an env file was recorded with.
- The folders: every folder of the project except the ones no user edits (dot folders, virtual
  environments, caches, outputs), each watched on its own, not recursively: a recursive watch of
  the project root would also put every folder of a ``.venv`` inside it under inotify.
- What a save affects: a cassette's own file affects it; a Python file affects the cassettes
  whose last run imported it (each run reports the project files it imported, and its env file
  counts too) — and every cassette that has not run yet, whose dependencies are unknown.
- A saved Python file that does not compile is reported (file:line, the caret) instead of
  replayed: every run that imports it would only fail the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WatchPlan", "own_cassettes", "project_root", "syntax_error", "watched_dirs",
           "worth_watching"]

_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# folders nobody edits a reward in: build output, caches, environments of packages, our outputs
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "replay-out", "build", "dist",
                        "site-packages", "htmlcov"})
CASSETTE_SUFFIXES = (".jsonl", ".jsonl.zst")


def project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with a project marker, else the working
    directory (the folder the user runs from)."""
    here = start.resolve()
    for folder in (here, *here.parents) if here.is_dir() else here.parents:
        if any((folder / marker).exists() for marker in _MARKERS):
            return folder
    return Path.cwd().resolve()


def watched_dirs(root: Path, also: Iterable[Path] = (), skip: Iterable[Path] = ()) -> list[Path]:
    """``root`` and its folders worth watching (see the module docstring), plus ``also``;
    never ``skip`` (the watch's own outputs: a groups file written there is JSON Lines)."""
    found: list[Path] = []
    skipped = {p.resolve() for p in skip}
    for folder, subdirs, _ in os.walk(root):
        found.append(Path(folder))
        subdirs[:] = sorted(d for d in subdirs if worth_watching(Path(folder) / d)
                            and (Path(folder) / d).resolve() not in skipped)
    for extra in also:
        if extra.is_dir() and extra.resolve() not in found:
            found.append(extra.resolve())
    return found


def worth_watching(folder: Path) -> bool:
    name = folder.name
    return not (name.startswith(".") or name in _SKIP_DIRS or name.endswith(".egg-info")
                or (folder / "pyvenv.cfg").exists())


def is_cassette_name(path: str) -> bool:
    return path.endswith(CASSETTE_SUFFIXES) and not Path(path).name.startswith(".")


def syntax_error(path: Path) -> str | None:
    """The compiler's message for ``path`` (file:line, the line and a caret), or None."""
    try:
        source = path.read_bytes()
    except OSError:
        return None  # removed or unreadable: the runs will say what is missing
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{exc.filename or path}:{exc.lineno or '?'}"
        if exc.offset:
            where += f":{exc.offset}"
        out = f"{where}: {type(exc).__name__}: {exc.msg}"
        if exc.text and exc.text.strip():
            line = exc.text.rstrip("\n")
            stripped = line.lstrip()
            out += "\n    " + stripped
            if exc.offset:
                out += "\n    " + " " * max(0, exc.offset - 1 - (len(line) - len(stripped))) + "^"
        return out
    except ValueError as exc:  # a NUL byte in the source
        return f"{path}: {exc}"
    return None


def header_of(cassette: Path) -> dict:
    from hermes_replay._cassette.files import first_line

    try:
        header = json.loads(first_line(cassette) or b"{}")
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def env_file_of(cassette: Path) -> Path | None:
    """The env file a cassette's header names, where the replay will find it (None if not)."""
    from hermes_replay._runner.plan import find_env_file

    name = header_of(cassette).get("env_file")
    if not isinstance(name, str) or not name:
        return None
    try:
        found = find_env_file(name, cassette)
    except Exception:  # refused (outside the project): the replay reports why
        return None
    return found.resolve() if found is not None else None


@dataclass
class WatchPlan:
    """The watched cassettes and what each one's last run imported."""

    root: Path
    target: Path
    cassettes: list[Path]
    env_filter: Path | None = None  # PATH was an env file: only its cassettes
    deps: dict[Path, set[Path]] = field(default_factory=dict)

    @classmethod
    def from_target(cls, target: Path) -> WatchPlan:
        root = project_root(target)
        env_filter = target.resolve() if target.suffix == ".py" else None
        plan = cls(root=root, target=target.resolve(), cassettes=[], env_filter=env_filter)
        plan.cassettes = plan.find()
        return plan

    @property
    def folder(self) -> Path:
        """Where this plan's cassettes live (new ones appearing there are picked up)."""
        if self.env_filter is not None:
            return self.root / "cassettes"
        return self.target if self.target.is_dir() else self.target.parent

    def find(self) -> list[Path]:
        from hermes_replay._cassette.merge import is_merged_shard
        from hermes_replay._runner.plan import find_cassettes

        if self.env_filter is None and self.target.is_file():
            return [self.target]
        found = [c.resolve() for c in find_cassettes(self.folder) if not is_merged_shard(c)]
        if self.env_filter is not None:
            found = [c for c in found if env_file_of(c) == self.env_filter]
        return found

    def name(self, cassette: Path) -> str:
        try:
            return cassette.relative_to(self.root).as_posix()
        except ValueError:
            return str(cassette)

    def ran(self, cassette: Path, files: Iterable[str]) -> None:
        """Record what a run of ``cassette`` imported (its env file included)."""
        deps = {Path(f) for f in files}
        env = env_file_of(cassette)
        if env is not None:
            deps.add(env)
        self.deps[cassette] = deps

    def affected(self, changed: Iterable[Path], removed: Iterable[Path] = ()) -> list[Path]:
        """The watched cassettes a change of these files affects, in the plan's order."""
        changed = {p.resolve() for p in changed}
        gone = {p.resolve() for p in removed}
        if any(is_cassette_name(str(p)) for p in changed | gone):
            # a cassette appeared or went: the set may have changed
            self.cassettes = self.find()
        hit = []
        for cassette in self.cassettes:
            deps = self.deps.get(cassette)
            touched = changed | gone
            if cassette in touched or deps is None or deps & touched:
                hit.append(cassette)
        return hit


def own_cassettes(env_file: Path) -> Path | None:
    """The env's cassettes, found as ``watch`` finds them: ``cassettes/<env stem>/`` where
    ``record`` puts them (from here, or the project root), else the folder of any cassette
    under the project's ``cassettes/`` whose header names this env file (``check ENV`` with
    neither a cassette nor an endpoint replays these)."""
    from hermes_replay._runner.plan import find_cassettes

    root = project_root(env_file.resolve())
    for base in (Path("cassettes"), root / "cassettes"):
        folder = base / env_file.stem
        if folder.is_dir() and find_cassettes(folder):
            return folder
    if (root / "cassettes").is_dir():
        for candidate in find_cassettes(root / "cassettes"):
            if env_file_of(candidate) == env_file.resolve():
                return candidate.parent
    return None
