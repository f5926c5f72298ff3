"""The environment a user names on the command line: an env file, or its module the way
``python -m`` takes it (``environments.community.x.y``, looked up from the working directory),
as the file to run and the module to run it as. Every command that runs or reads an env
(``record``, ``replay ENV_FILE``, ``passthrough``, ``check``, ``probe``, ``watch``) resolves it
here, so they agree on what a name means.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["check_env_file", "module_as_file", "resolve_env"]


def check_env_file(prog: str, env_file: str) -> str | None:
    """Why ENV_FILE cannot be run (a usage message), or None."""
    found = resolve_env(prog, env_file)
    return found if isinstance(found, str) else None


_MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def module_as_file(given: str) -> str:
    """A module name (``environments.community.x.y``) as its file, looked up from the working
    directory as ``python -m`` would; anything else unchanged. For the commands that read an
    env file by path (``check``, ``probe``, ``watch``): the file then runs as its module."""
    from hermes_replay._runner.envrun import file_of_module

    if _MODULE_NAME.fullmatch(given) and not given.endswith(".py") and not Path(given).exists():
        found = file_of_module(given, Path.cwd())
        if found is not None:
            return str(found)
    return given


def resolve_env(prog: str, given: str) -> tuple[Path, tuple[str, Path] | None] | str:
    """ENV_FILE as the user gave it — a file, or a module the way ``python -m`` takes it
    (``environments.community.x.y``, looked up from the working directory as ``python -m``
    run there would) — as ``(file, (module, folder) or None)``, or a usage message. A file
    that lies in a package and imports relatively runs as its module, from the working
    directory when it lies below it (Atropos' namespace packages have no ``__init__.py``)."""
    from hermes_replay._runner.envrun import file_of_module, module_below, module_of
    from hermes_replay._runner.plan import project_root

    path = Path(given)
    cwd = Path.cwd()
    if _MODULE_NAME.fullmatch(given) and not given.endswith(".py") and not path.exists():
        found = file_of_module(given, cwd)
        if found is None:
            return (f"hermes-replay {prog}: no module {given} found from {cwd} (looked for "
                    f"{Path(*given.split('.')).with_suffix('.py')} there and on sys.path). "
                    "Next step: run from the folder you would run `python -m "
                    f"{given}` from (the repository root), or pass the env file's path.")
        folder = found.resolve().parents[len(given.split(".")) - 1]
        return found, module_below(found, folder)
    if not path.is_file():
        return (
            f"hermes-replay {prog}: environment file {given} does not exist "
            f"(looked in {cwd}). Next step: pass the path of your env .py file, or its "
            "module (-m environments.community.x.y) from the repository root."
        )
    if path.suffix != ".py":
        return (
            f"hermes-replay {prog}: {given} is not a Python file; ENV_FILE is the "
            "environment script that ends with `MyEnv.cli()`."
        )
    where = path.resolve()
    root = cwd.resolve() if where.is_relative_to(cwd.resolve()) else project_root(where.parent)
    return path, module_of(where, root=root)
