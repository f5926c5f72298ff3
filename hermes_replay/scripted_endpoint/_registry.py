"""Scripts by name: ``@register_script(name)`` for your own, the bundled ones found lazily.

The bundled scripts (``scripts/generic.py``, ``scripts/examples.py``) are named here and
imported the first time a script is looked up, so importing the package stays cheap; they do
not import this module, which keeps the graph free of cycles.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hermes_replay.scripted_endpoint._script import Script
from hermes_replay.scripted_endpoint._script_file import looks_like_script_file, read_script_file

__all__ = ["SCRIPTS", "get_script", "list_scripts", "load_script", "register_script",
           "resolve_script"]

_REGISTRY: dict[str, Callable[[], Script]] = {}
SCRIPTS: Mapping[str, Callable[[], Script]] = MappingProxyType(_REGISTRY)

# name -> "module:factory" of the scripts that ship with the package
_BUNDLED = {
    "generic": "hermes_replay.scripted_endpoint.scripts.generic:generic",
    "examples": "hermes_replay.scripted_endpoint.scripts.examples:examples",
}


def register_script(name: str) -> Callable[[Callable[[], Script]], Callable[[], Script]]:
    """Decorator: register a factory returning a :class:`Script` under ``name``.

    Names are unique; registering one twice raises ``ValueError`` (two modules fighting over a
    name is always a bug).
    """

    def decorate(factory: Callable[[], Script]) -> Callable[[], Script]:
        if name in _REGISTRY and _REGISTRY[name] is not factory:
            raise ValueError(
                f"scripted endpoint: a script named {name!r} is already registered "
                f"(by {_REGISTRY[name].__module__}); pick another name"
            )
        _REGISTRY[name] = factory
        return factory

    return decorate


def _load_bundled() -> None:
    for name, target in _BUNDLED.items():
        if name not in _REGISTRY:
            module, _, factory = target.partition(":")
            register_script(name)(getattr(importlib.import_module(module), factory))


def list_scripts() -> list[str]:
    _load_bundled()
    return sorted(_REGISTRY)


def get_script(name: str) -> Script:
    """Build the script registered as ``name``; unknown names raise ``KeyError`` listing the
    registered ones."""
    _load_bundled()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"scripted endpoint: no script named {name!r}; registered: "
            f"{', '.join(sorted(_REGISTRY))}. Register one with "
            "@register_script(name) in a module that is imported before the endpoint starts, "
            "or pass a script file (my_env.toml; docs/scripted-endpoint.md)."
        ) from None
    return factory()


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read a script file (``docs/scripted-endpoint.md``); its ``fallback`` names a registered
    script. Mistakes raise ``ScriptFileError`` naming the file, the rule and the key."""
    return read_script_file(path, get_script)


def resolve_script(spec: str | os.PathLike[str] | Script) -> Script:
    """What ``--script`` / ``ScriptedEndpoint(script=...)`` names: a :class:`Script`, a script
    file (a path, or anything ending in .toml/.json), or a registered name.

    A bare word is a registered name first, so a stray file called ``generic`` in the working
    directory never replaces the bundled script; only when no script has that name is an
    existing file of that name read.
    """
    if isinstance(spec, Script):
        return spec
    if not isinstance(spec, str) or looks_like_script_file(spec):
        return load_script(spec)
    _load_bundled()
    if spec not in _REGISTRY and os.path.isfile(spec):
        return load_script(spec)
    return get_script(spec)
