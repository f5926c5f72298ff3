"""Interception: one seam per client library, installed only while a cassette is active.

- httpx  — ``HTTPTransport.handle_request`` / ``AsyncHTTPTransport.handle_async_request``
- httpx2 — the same two methods (the openai 3.x SDK runs on httpx2)
- aiohttp — ``ClientSession._request`` (atroposlib's vLLM/SGLang ``/generate``)

Adapters translate their library's request into a ``WireRequest`` and ask the active
``Handler`` (the cassette session of this context, from ``_active``) what to do; the handler
never sees a library type. Installation is reference counted: the first active cassette
patches, the last one to leave restores the originals. Nothing is patched at import time,
and a library that is not imported yet is patched when it is imported inside the block, not
imported to be patched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, Protocol

from hermes_replay import _active

__all__ = ["Exchange", "Handler", "WireRequest", "WireResponse", "activate", "current",
           "deactivate", "installed"]


@dataclass
class WireRequest:
    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class WireResponse:
    """A response as bytes: ``body`` for a plain one, ``chunks`` for an event stream."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes | None = None
    chunks: list[bytes] | None = None
    reason: str = ""

    @property
    def content(self) -> bytes:
        return self.body if self.body is not None else b"".join(self.chunks or [])


class Exchange(Protocol):
    """What to do with one intercepted request, and how to report how it went."""

    action: Literal["replay", "record", "passthrough"]
    response: WireResponse | None  # set for "replay"

    def answering(self) -> None:
        """The answer has begun (its headers arrived); ``finish`` or ``fail`` follows at its end."""

    def finish(self, response: WireResponse) -> None: ...

    def fail(self, error: BaseException | None = None) -> None: ...


class Handler(Protocol):
    def wants(self, method: str, url: str) -> bool:
        """Cheap check (no body read): is this request the handler's business at all?"""

    def begin(self, request: WireRequest) -> Exchange: ...


@dataclass
class _State:
    lock: threading.RLock = field(default_factory=threading.RLock)
    active: bool = False  # a cassette is open somewhere in the process
    installed: list[str] = field(default_factory=list)


_STATE = _State()


# client library -> its adapter module. A library is patched when a cassette opens if it
# is already imported, else the moment it is imported inside the block: importing one only
# to patch it cost 0.25 s per process (httpx, which an openai 3.x / atroposlib run never uses).
_LIBRARIES = {"httpx": "_httpx", "httpx2": "_httpx2", "aiohttp": "_aiohttp"}


def _adapter(library: str) -> Any:
    return importlib.import_module(f"hermes_replay._session.intercept.{_LIBRARIES[library]}")


def _install(library: str) -> None:
    """Patch ``library`` if a cassette is active and it is not patched yet (lock held)."""
    if _STATE.active and library not in _STATE.installed and _adapter(library).install():
        _STATE.installed.append(library)


def _imported(library: str) -> bool:
    """Imported and done: one still being imported (by another thread) is left to the
    hook, which patches it when its import finishes — waiting for it here could deadlock."""
    module = sys.modules.get(library)
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches a client library right after its first import inside a cassette block."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _LIBRARIES:
            return None
        for finder in sys.meta_path:  # find the real spec with the finders after us
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, fullname)
        return spec


class _PatchingLoader:
    """The real loader, plus the patch once the module has run. A wrapper, not a changed
    loader: a loader can be shared by many modules (a zip importer)."""

    def __init__(self, inner: Any, library: str) -> None:
        self._inner, self._library = inner, library

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        with _STATE.lock:
            _install(self._library)

    def __getattr__(self, name: str) -> Any:  # resource readers, get_data, is_package …
        return getattr(self._inner, name)


_HOOK = _PatchOnImport()


def activate(handler: Handler) -> None:
    """Bind ``handler`` to this context (see ``_active``); patch the libraries on first use."""
    with _STATE.lock:
        if _active.enter(handler):  # type: ignore[arg-type]
            _STATE.active = True
            for library in _LIBRARIES:
                if _imported(library):
                    _install(library)
            if _HOOK not in sys.meta_path:
                sys.meta_path.insert(0, _HOOK)


def deactivate(handler: Handler) -> None:
    with _STATE.lock:
        if _active.leave(handler):  # type: ignore[arg-type]
            _STATE.active = False
            if _HOOK in sys.meta_path:
                sys.meta_path.remove(_HOOK)
            for library in _STATE.installed:
                _adapter(library).uninstall()
            _STATE.installed.clear()


def current() -> Handler | None:
    """The handler for a request made in this context (``_active.current``)."""
    return _active.current()  # type: ignore[return-value]


def installed() -> tuple[str, ...]:
    """Names of the libraries currently patched (for tests and diagnostics)."""
    return tuple(_STATE.installed)
