"""The Hermes environment layer stays importable when a project's own ``environments``
package hides it.

The layer is installed as the namespace package ``environments`` (no ``__init__.py``), so
it merges with an Atropos checkout's ``environments/`` namespace instead of shadowing it.
A project whose ``environments`` is a *regular* package (with ``__init__.py``) wins the name
outright, as it should — its own modules come first — and then the former layer's modules
(``environments.agent_loop``, ``environments.hermes_base_env`` …) would be unreachable. This
finder, last on ``sys.meta_path``, is asked only after every other finder failed, and only
for a direct child of ``environments``: it looks for that name among the layer's own files.
It imports nothing itself and never replaces a module the project has.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["LAYER_DIR", "install_layer_fallback"]

# the layer's folder: beside this package, in site-packages (a wheel) or in the checkout
LAYER_DIR = Path(__file__).resolve().parent.parent / "environments"


class LayerFallback:
    """Finds ``environments.<name>`` in the layer's folder when the imported ``environments``
    package is a project's own and holds no such module."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("environments.") or fullname.count(".") != 1:
            return None
        parent = sys.modules.get("environments")
        if parent is None or not LAYER_DIR.is_dir():
            return None
        searched = [str(p) for p in getattr(parent, "__path__", None) or ()]
        if str(LAYER_DIR) in searched:
            return None  # the layer is a portion of it already: the name is not there
        return PathFinder.find_spec(fullname, [str(LAYER_DIR)])


def install_layer_fallback() -> None:
    """Put the finder at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, LayerFallback) for finder in sys.meta_path):
        sys.meta_path.append(LayerFallback())
