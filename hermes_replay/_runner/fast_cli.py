"""The fixed CPU cost of starting an environment's CLI, cut where the work is pure waste.

Every run (``replay``, ``watch``, pytest, CI) starts an env's atroposlib CLI, which spent about
60 ms of a ~220 ms replay on work whose result is thrown away or is the same every time. Three
patches of third-party code, installed for one run by :func:`fast_cli` (depth-counted, put
back after) and each behaviour-identical:

1. **pydantic-cli's help strings** (``_add_pydantic_field_to_parser``): for each of ~70 fields
   per parser (one per mode, three a run) it deep-copies the field's ``FieldInfo`` only to
   blank ``json_schema_extra`` on the copy and ``repr`` it into the help text (20–25 ms a run,
   mostly deep copies of typing objects). ``FieldInfo._copy()`` (pydantic's own copy: every
   slot, and fresh ``metadata``/``_attributes_set``) gives a copy whose ``json_schema_extra``
   can be set without touching the original, and whose ``repr`` is the same text: the repr
   prints each attribute's repr, and a deep copy of an attribute reprs like the attribute
   itself. The module's ``deepcopy`` is used nowhere else; anything but a ``FieldInfo``
   still deep-copies.
2. **atroposlib's prefixed models** (``get_prefixed_pydantic_model``, imported by name into
   ``atroposlib.envs.base``): each run builds ``openai.``-prefixed copies of
   ``APIServerConfig`` (identical every run) with pydantic's ``create_model``. For a class
   defined by atroposlib itself the result is kept, keyed by the class object (a class purged
   and imported anew, as an editable Atropos checkout's is in a warm process, is a new key and
   replaces the old entry). Safe because nothing changes the returned class: atroposlib only
   uses it as a base of its ``Cli*Config`` classes, and pydantic copies a base's fields into a
   subclass rather than altering them. The user's env config class is kept for one run only
   (atroposlib prefixes it three times a run, once per mode, each the same class): it is new
   every run, and may change between runs, so the run's entries go when the run ends.
3. **httpx2's TLS context** (``create_ssl_context``, called by every default transport, so by
   every ``AsyncOpenAI()``): loading the system's CA bundle takes ~20 ms a client. In a
   *replay* only, the default-arguments case (``verify=True``, no ``cert``) returns one
   context per process and per the inputs it is made from (``trust_env`` and, when trusted,
   ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built by httpx2's own code. A replay answers the LLM
   traffic from the cassette and refuses other non-loopback sockets, so the context is at most
   used for a ``--llm live=`` call, configured as httpx2 would configure it. A recording,
   ``auto`` or passthrough run (real TLS to a real endpoint) never takes this path.

The fourth saving, the flag check reading atroposlib's own parser instead of building another,
lives with the check (``_runner.flags``). :func:`warm_up` fills 2 and 3 in the warm process
before it forks (``_runner.warm``), so a forked run finds them made.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["fast_cli", "switched_off", "warm_up"]

_LOCK = threading.Lock()
_OFF = {"off": False}  # switched_off(): runs go as before this module
_DEPTH = {"all": 0, "tls": 0}
_ORIGINAL: dict[str, Any] = {}

# (module, qualname, prefix) -> (the class, its prefixed model): one entry per name, so a class
# imported anew replaces its old entry instead of piling up beside it
_PREFIXED: dict[tuple[str, str, str], tuple[type, Any]] = {}
# (the user's class, prefix) -> its prefixed model, for the run now going (cleared at its end)
_RUN_PREFIXED: dict[tuple[int, str], tuple[type, Any]] = {}
# the inputs httpx2 builds a default context from -> that context
_TLS: dict[tuple[Any, ...], Any] = {}


def _field_copy(value: Any, memo: Any = None) -> Any:
    from pydantic.fields import FieldInfo

    if isinstance(value, FieldInfo):
        return value._copy()
    return copy.deepcopy(value, memo)


def _is_atroposlibs(cls: Any) -> bool:
    return isinstance(cls, type) and str(getattr(cls, "__module__", "")).split(".")[0] == \
        "atroposlib"


def _prefixed(base_model: Any, prefix: str) -> Any:
    build = _ORIGINAL.get("prefixed")
    if build is None:  # outside a run (another thread's run ended): atroposlib's own
        from atroposlib.utils.cli import get_prefixed_pydantic_model as build
    if not _is_atroposlibs(base_model):
        if _DEPTH["all"] == 0:
            return build(base_model, prefix)
        mine = _RUN_PREFIXED.get((id(base_model), prefix))
        if mine is not None and mine[0] is base_model:
            return mine[1]
        model = build(base_model, prefix)
        _RUN_PREFIXED[(id(base_model), prefix)] = (base_model, model)
        return model
    key = (base_model.__module__, base_model.__qualname__, prefix)
    kept = _PREFIXED.get(key)
    if kept is not None and kept[0] is base_model:
        return kept[1]
    model = build(base_model, prefix)
    _PREFIXED[key] = (base_model, model)
    return model


def _tls_key(trust_env: bool) -> tuple[Any, ...]:
    if not trust_env:
        return (False,)
    return (True, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def _shared_tls(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
    make = _ORIGINAL.get("tls")
    if make is None:
        from httpx2._config import create_ssl_context as make
    if verify is not True or cert is not None or _DEPTH["tls"] == 0:
        return make(verify=verify, cert=cert, trust_env=trust_env)
    key = _tls_key(bool(trust_env))
    context = _TLS.get(key)
    if context is None:
        context = _TLS[key] = make(verify=True, cert=None, trust_env=trust_env)
    return context


_STACK = ("pydantic_cli", "atroposlib.envs.base", "httpx2._transports.default")


def _modules() -> tuple[Any, Any, Any] | None:
    try:
        import atroposlib.envs.base as atropos_base
        import httpx2._transports.default as transports
        import pydantic_cli
    except ImportError:
        return None
    return pydantic_cli, atropos_base, transports


def _install(reuse_tls: bool) -> None:
    modules = _modules()
    if modules is None:
        return
    pydantic_cli, atropos_base, transports = modules
    if _DEPTH["all"] == 0:
        if getattr(pydantic_cli, "deepcopy", None) is copy.deepcopy:
            _ORIGINAL["deepcopy"] = pydantic_cli.deepcopy
            pydantic_cli.deepcopy = _field_copy
        if hasattr(atropos_base, "get_prefixed_pydantic_model"):
            _ORIGINAL["prefixed"] = atropos_base.get_prefixed_pydantic_model
            atropos_base.get_prefixed_pydantic_model = _prefixed
    _DEPTH["all"] += 1
    if reuse_tls:
        if _DEPTH["tls"] == 0 and hasattr(transports, "create_ssl_context"):
            _ORIGINAL["tls"] = transports.create_ssl_context
            transports.create_ssl_context = _shared_tls
        _DEPTH["tls"] += 1


def _uninstall(reuse_tls: bool) -> None:
    modules = _modules()
    if modules is None:
        return
    pydantic_cli, atropos_base, transports = modules
    if reuse_tls:
        _DEPTH["tls"] -= 1
        if _DEPTH["tls"] == 0 and "tls" in _ORIGINAL:
            transports.create_ssl_context = _ORIGINAL.pop("tls")
    _DEPTH["all"] -= 1
    if _DEPTH["all"] == 0:
        _RUN_PREFIXED.clear()
        if "deepcopy" in _ORIGINAL:
            pydantic_cli.deepcopy = _ORIGINAL.pop("deepcopy")
        if "prefixed" in _ORIGINAL:
            atropos_base.get_prefixed_pydantic_model = _ORIGINAL.pop("prefixed")


@contextmanager
def fast_cli(*, reuse_tls: bool = False) -> Iterator[None]:
    """Inside the block, an env CLI's fixed costs are cut (1 and 2 above; 3 with
    ``reuse_tls``, which only a replay may ask for). Re-entrant and thread-safe."""
    if _OFF["off"]:
        yield
        return
    with _LOCK:
        _install(reuse_tls)
    try:
        yield
    finally:
        with _LOCK:
            _uninstall(reuse_tls)


def warm_up() -> None:
    """Make what a run would otherwise make first (the warm process, before it forks): the
    prefixed models of atroposlib's config classes, and a replay's TLS context. Only when the
    preload imported the stack: importing it here would make a small warm process a big one."""
    if not all(name in sys.modules for name in _STACK):
        return
    from atroposlib.envs.base import APIServerConfig, BaseEnvConfig

    with fast_cli(reuse_tls=True):
        _prefixed(APIServerConfig, "openai.")
        _prefixed(BaseEnvConfig, "env.")
        _shared_tls()


@contextmanager
def switched_off() -> Iterator[None]:
    """Inside the block, runs start their env CLI as before this module: no patches, and the
    flag check builds a parser of its own. For measuring what the patches save side by side
    (``benchmarks/cli_cost_bench.py``) and for proving them behaviour-identical (the tests):
    never needed by a user. Not thread-safe: a run in another thread sees it too."""
    import hermes_replay._runner.flags as flags

    saved = flags.parser_options
    _OFF["off"] = True
    flags.parser_options = lambda parser, mode: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _OFF["off"] = False
        flags.parser_options = saved  # type: ignore[assignment]
