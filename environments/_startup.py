"""Startup checks: a configuration this layer cannot run stops before the first rollout.

The former Hermes layer accepted, for example, ``terminal_backend: modal`` and then failed every
tool call, so a run "succeeded" with every reward 0.0. Here every such case raises
:class:`StartupError` while the environment is being built, with a message that names the field,
what is available, and the flag to use; the environment CLI prints it and exits 2.

Checked: the terminal backend, the toolsets (enabled, disabled, a distribution, toolsets of the
former layer that are not provided), the web backend when web tools can be offered, and a
tokenizer named by a hub id when the hub cannot be reached.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import hermes_replay
from environments.agent_loop import resize_tool_pool, tool_pool_size
from environments.tools import NOT_PROVIDED, cleanup_sandbox, get_sandbox, toolsets
from environments.tools.distributions import get_distribution
from environments.tools.sandbox import available_backends
from environments.tools.web import set_web_backend
from environments.tools.web_backends import WebBackendUnavailable, make_web_backend

__all__ = ["WEB_TOOLSETS", "StartupError", "check_startup", "default_toolsets", "replaying"]

#: toolsets whose tools need a configured web backend
WEB_TOOLSETS = frozenset({"web", "search"})
#: sandbox backends of the former layer that this layer does not provide
CLOUD_BACKENDS = {
    "modal": "Modal cloud sandboxes", "daytona": "Daytona cloud workspaces",
    "ssh": "a remote host over SSH", "singularity": "Singularity/Apptainer containers",
}
_PROBE_TASK = "hermes-startup-probe"


class StartupError(ValueError):
    """The environment cannot run as configured; the message says which field and what to do."""


def replaying() -> bool:
    """True inside a hermes-replay cassette that replays (HTTP answered from the recording)."""
    return hermes_replay.active_mode() == "replay"


def check_startup(config: Any) -> None:
    """Raise :class:`StartupError` for anything that would fail later; set up the web backend
    and the tool thread pool. Called by ``HermesAgentBaseEnv.__init__``."""
    _check_terminal_backend(config.terminal_backend)
    offered = _check_toolsets(config)
    if offered & WEB_TOOLSETS:
        try:
            set_web_backend(make_web_backend(config.web_backend, config.web_corpus_dir,
                                             replaying=replaying()))
        except WebBackendUnavailable as exc:
            raise StartupError(f"toolsets {sorted(offered & WEB_TOOLSETS)} need a web backend: "
                               f"{exc}") from None
    if config.tool_pool_size != tool_pool_size():
        resize_tool_pool(config.tool_pool_size)


def _usable_backends() -> list[str]:
    usable = []
    for name in available_backends():
        try:
            _probe(name)
        except Exception:
            continue
        usable.append(name)
    return usable


def _probe(name: str) -> None:
    """Build (and remove) one sandbox: a backend that cannot run says so here, not per call."""
    if name == "local":
        return  # always there; creating one only makes a temp folder
    try:
        get_sandbox(_PROBE_TASK, name)
    finally:
        cleanup_sandbox(_PROBE_TASK)


def _check_terminal_backend(name: str) -> None:
    flag = "--env.terminal_backend"
    if name not in available_backends():
        what = f" ({CLOUD_BACKENDS[name]})" if name in CLOUD_BACKENDS else ""
        raise StartupError(
            f"terminal_backend {name!r}{what} is not provided here; available: "
            f"{', '.join(_usable_backends())}. Run with {flag} local (per-rollout sandboxes on "
            "this machine).")
    try:
        _probe(name)
    except Exception as exc:
        raise StartupError(
            f"terminal_backend {name!r} cannot run here ({exc}); available: "
            f"{', '.join(_usable_backends())}. Run with {flag} local.") from None


def default_toolsets(config: Any) -> list[str]:
    """What ``enabled_toolsets=None`` offers: every toolset that needs no configuration; the
    web ones only once ``web_backend`` is set explicitly (so a key in the shell never changes
    which tools a model is offered)."""
    web_ready = config.web_backend != "auto" or bool(config.web_corpus_dir)
    return [ts for ts in toolsets() if web_ready or ts not in WEB_TOOLSETS]


def _check_toolsets(config: Any) -> set[str]:
    """Validate the toolset fields; return every toolset a group could be offered."""
    have = toolsets()
    disabled = set(config.disabled_toolsets or [])
    unknown = sorted(d for d in disabled if d not in have and d not in NOT_PROVIDED)
    if unknown:
        raise StartupError(f"disabled_toolsets names unknown toolset(s) {unknown}; available: "
                           f"{', '.join(sorted(have))}")
    if config.distribution and config.enabled_toolsets is not None:
        raise StartupError("distribution and enabled_toolsets are exclusive: set one of "
                           "--env.distribution or --env.enabled_toolsets")
    if config.distribution:
        try:
            wanted = set(get_distribution(config.distribution)) - disabled
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        field = f"distribution {config.distribution!r}"
    elif config.enabled_toolsets is not None:
        wanted, field = set(config.enabled_toolsets) - disabled, "enabled_toolsets"
    else:
        return set(default_toolsets(config)) - disabled
    missing = sorted(wanted - set(have))
    if missing:
        reasons = "; ".join(f"{m!r}: {NOT_PROVIDED.get(m, 'unknown toolset')}" for m in missing)
        raise StartupError(
            f"{field} asks for toolset(s) this layer does not provide ({reasons}). Available "
            f"toolsets: {', '.join(sorted(have))}. Change --env.enabled_toolsets/"
            f"--env.distribution, or drop them with --env.disabled_toolsets "
            f"{','.join(missing)}.")
    return wanted


def check_tokenizer(name: str) -> None:
    """A hub id that cannot be fetched stops now, with the way out, instead of after a minute
    of retries inside ``AutoTokenizer.from_pretrained``."""
    if os.path.isdir(name) or _cached(name):
        return
    offline = any(os.environ.get(v, "") not in ("", "0")
                  for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if not offline and _hub_resolves():
        return
    raise StartupError(
        f"tokenizer_name {name!r} is neither a local folder nor reachable (the Hugging Face "
        "hub cannot be reached from here). Pass a local copy of that tokenizer with "
        "--env.tokenizer_name <folder>: `hermes-replay record` stores its files in the "
        "cassette tokenizer store (<cassettes>/.tokenizers/<sha256>/), and a replay then uses "
        "the stored copy with no hub.")


def _cached(name: str) -> bool:
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:
        return False
    return True


def _hub_resolves() -> bool:
    try:
        socket.getaddrinfo("huggingface.co", 443)
    except OSError:
        return False
    return True
