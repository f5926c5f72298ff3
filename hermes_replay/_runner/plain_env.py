"""What the harness does for a plain atroposlib ``BaseEnv`` subclass it runs, file untouched.

``run_env`` enters :func:`plain_env_support` around the env's CLI. While it is active,
atroposlib's ``BaseEnv.__init__`` is wrapped (restored when the last run leaves; the wrapper
does nothing for a context with no run of ours), and for every environment it constructs that
does not open rollout scopes itself (``HermesAgentBaseEnv`` does, and says so with the class
attribute ``hermes_replay_own_rollout_scopes``) it:

1. settles the machine defaults before atroposlib sees them — an empty API key becomes a
   placeholder held only in memory (openai refuses an empty one; local endpoints need none),
   a lone ``APIServerConfig`` becomes a list (else ``ServerManager`` ignores its base_url),
   the env's and every vLLM/SGLang server config's ``tokenizer_name`` go through the
   cassette's tokenizer store (``tokenizer_for_run``), a live vLLM/SGLang endpoint that has no
   ``/generate`` stops the run at once (``generate_probe``), health checks are off in replay, and
   ``managed_server`` over an OpenAI endpoint gets atroposlib's dummy managed server (its
   variable set for the run) with a warning that its tokens are placeholders;
2. tells the cassette the env's name and tokenizer (as the Hermes layer does);
3. installs :class:`~hermes_replay._runner.plain_groups.GroupIdentity` — group and rollout scopes
   from the item, per-rollout rewards from the returned ``ScoredDataGroup``.

Each case handled is named once in the run's output (``RunResult.handled``).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hermes_replay import _active

__all__ = ["OWN_SCOPES", "PLACEHOLDER_API_KEY", "PlainRun", "plain_env_support"]

#: class attribute an environment base sets to True when it opens rollout scopes itself
OWN_SCOPES = "hermes_replay_own_rollout_scopes"
PLACEHOLDER_API_KEY = "EMPTY"
DUMMY_MANAGED_VARIABLE = "ATROPOS_ALLOW_DUMMY_MANAGED_SERVER"


@dataclass
class PlainRun:
    """One run's plain-env state: what was handled (each case once) and the envs seen."""

    mode: str
    handled: list[str] = field(default_factory=list)
    identities: list[Any] = field(default_factory=list)
    probed: set[str] = field(default_factory=set)  # vLLM/SGLang roots checked for /generate

    def note(self, text: str) -> None:
        if text not in self.handled:
            self.handled.append(text)


_RUN: contextvars.ContextVar[PlainRun | None] = contextvars.ContextVar(
    "hermes_replay_plain_run", default=None)
_LOCK = threading.Lock()
_INSTALLED: list[Any] = []  # [original __init__] while at least one run is active
_USERS = 0


@contextmanager
def plain_env_support(mode: str) -> Iterator[PlainRun]:
    """Handle plain ``BaseEnv`` subclasses constructed inside the block (see module doc)."""
    global _USERS
    try:
        from atroposlib.envs.base import BaseEnv
    except ImportError:  # no atroposlib: nothing to adapt
        yield PlainRun(mode)
        return
    run = PlainRun(mode)
    token = _RUN.set(run)
    with _LOCK:
        if _USERS == 0:
            original = BaseEnv.__dict__["__init__"]
            _INSTALLED.append(original)
            BaseEnv.__init__ = _wrapped_init(original)  # type: ignore[method-assign]
        _USERS += 1
    saved_dummy = os.environ.get(DUMMY_MANAGED_VARIABLE)
    try:
        yield run
    finally:
        _RUN.reset(token)
        if saved_dummy is None:
            os.environ.pop(DUMMY_MANAGED_VARIABLE, None)
        else:
            os.environ[DUMMY_MANAGED_VARIABLE] = saved_dummy
        with _LOCK:
            _USERS -= 1
            if _USERS == 0:
                BaseEnv.__init__ = _INSTALLED.pop()  # type: ignore[method-assign]


def _wrapped_init(original: Any) -> Any:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        run = _RUN.get()
        if run is None or getattr(type(self), OWN_SCOPES, False) or _active.current() is None:
            original(self, *args, **kwargs)
            return
        bound = signature.bind(self, *args, **kwargs)
        config = bound.arguments.get("config")
        env_name = getattr(type(self), "name", None) or type(self).__name__
        tokenizer = _env_tokenizer(config)
        if "server_configs" in bound.arguments:
            bound.arguments["server_configs"] = machine_defaults(
                run, env_name, bound.arguments["server_configs"], tokenizer)
        original(*bound.args, **bound.kwargs)
        _after_init(run, self, env_name, tokenizer)

    return __init__


def _env_tokenizer(config: Any) -> tuple[str | None, str | None]:
    """(the name the env asked for, the one it loads): a replay loads the stored copy."""
    from hermes_replay._tokenizers.store import tokenizer_for_run

    asked = getattr(config, "tokenizer_name", None)
    if not isinstance(asked, str) or not asked:
        return None, None
    loaded = tokenizer_for_run(asked)
    if loaded != asked:
        config.tokenizer_name = loaded
    return asked, loaded


def machine_defaults(run: PlainRun, env_name: str, configs: Any,
                     tokenizer: tuple[str | None, str | None]) -> Any:
    """The server configs with this machine's defaults settled (see the module docstring)."""
    try:
        from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    except ImportError:
        return configs
    from hermes_replay._tokenizers.store import tokenizer_for_run

    if isinstance(configs, APIServerConfig) and (configs.base_url or "").strip():
        run.note(f"{env_name}: a single APIServerConfig was made a list of one (atroposlib "
                 "ignores the base_url of one that is not in a list)")
        configs = [configs]
    if not isinstance(configs, list):
        return configs
    loaded = tokenizer[1]
    for cfg in configs:
        if not isinstance(cfg, APIServerConfig):
            continue
        if not (cfg.api_key or "").strip():
            cfg.api_key = PLACEHOLDER_API_KEY
            run.note(f"{env_name}: no API key configured for {cfg.base_url or 'the endpoint'}; "
                     "a placeholder key is sent (held in memory, never written)")
        if run.mode == "replay" and cfg.health_check:
            cfg.health_check = False
            run.note("health checks off (replay answers from the cassette)")
        if cfg.server_type == "openai":
            if not os.environ.get(DUMMY_MANAGED_VARIABLE):
                os.environ[DUMMY_MANAGED_VARIABLE] = "1"  # restored when the run ends
            continue
        if run.mode != "replay" and cfg.base_url and cfg.server_type in ("vllm", "sglang") \
                and cfg.base_url not in run.probed:
            from hermes_replay._runner.generate_probe import check_generate

            run.probed.add(cfg.base_url)
            check_generate(cfg.base_url, cfg.server_type)  # an OpenAI-only server: stop now
        # VLLM/SGLang servers load their own tokenizer (from the hub unless it is a folder):
        # the env's one — the cassette's stored copy in replay — unless a local folder is named
        name = cfg.tokenizer_name
        if name not in ("", "none", None) and os.path.isdir(str(name)):
            target = tokenizer_for_run(str(name))
        else:
            target = loaded or name
        if target and target != name:
            cfg.tokenizer_name = target
            shown = "unnamed" if name in ("", "none", None) else repr(name)
            run.note(f"{env_name}: the {cfg.server_type} server's tokenizer ({shown}) is the "
                     "env's, through the cassette's tokenizer store (no hub download)")
    return configs


def _after_init(run: PlainRun, env: Any, env_name: str,
                tokenizer: tuple[str | None, str | None]) -> None:
    from hermes_replay._runner.plain_groups import GroupIdentity
    from hermes_replay._tokenizers.store import check_tokenizer, describe

    asked, loaded = tokenizer
    fields: dict[str, Any] = {"env_name": env_name, "env_kind": "plain"}
    if loaded:
        check_tokenizer(loaded)  # replay: not the recorded tokenizer → stop now, say so
        fields["tokenizer"] = describe(loaded if run.mode == "replay" else asked or loaded)
    _active.annotate(**fields)
    identity = GroupIdentity(env, note=run.note)
    identity.install(env)
    run.identities.append(identity)
    _warn_dummy_managed(run, env, env_name)


def _warn_dummy_managed(run: PlainRun, env: Any, env_name: str) -> None:
    """``managed_server`` over OpenAI servers: atroposlib's dummy, named once when used."""
    server = getattr(env, "server", None)
    servers = getattr(server, "servers", None) or []
    try:
        from atroposlib.envs.server_handling.openai_server import OpenAIServer
    except ImportError:
        return
    if not servers or not all(isinstance(s, OpenAIServer) for s in servers):
        return
    managed = server.managed_server

    @functools.wraps(managed)
    def managed_server(*args: Any, **kwargs: Any) -> Any:
        run.note(f"warning: {env_name} uses managed_server over an OpenAI endpoint: atroposlib's "
                 f"DummyManagedServer is used ({DUMMY_MANAGED_VARIABLE}=1 for this run), its "
                 "token ids and logprobs are placeholders, not training data; record with "
                 "--server-type vllm|sglang for real ones")
        return managed(*args, **kwargs)

    server.managed_server = managed_server
