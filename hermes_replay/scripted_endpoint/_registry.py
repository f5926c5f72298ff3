"""Scripts by name: ``@register_script(name)`` for your own, the bundled ones found lazily.

The bundled scripts (``scripts/generic.py``, ``scripts/examples.py``) are named here and
imported the first time a script is looked up, so importing the package stays cheap; they do
not import this module, which keeps the graph free of cycles.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hermes_replay.scripted_endpoint._script import Script

__all__ = ["SCRIPTS", "get_script", "list_scripts", "register_script"]

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
            "@register_script(name) in a module that is imported before the endpoint starts."
        ) from None
    return factory()
