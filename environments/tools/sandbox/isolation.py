"""Whether the ``local`` backend runs commands inside bubblewrap: the policy and its limits.

Commands a model chose are untrusted code. Where bubblewrap (``bwrap``, Debian package
``bubblewrap``) works, every ``local`` command runs inside it (see ``_bwrap`` for the exact
boundary). The policy comes from the ``HERMES_SANDBOX`` environment variable, read when a
sandbox is created:

``auto`` (default)
    bwrap where it works; elsewhere the old folder-and-process-group sandbox, with one warning.
    This is what an environment author's own live run (``python my_env.py process …``) gets.
``bwrap``
    isolation is required: creating a sandbox fails with ``IsolationUnavailableError`` (saying
    how to install bubblewrap) where bwrap does not work. hermes-replay sets this while it
    records or replays, so a cassette's or a live endpoint's commands never run on the host
    unless the user says so (``--trust-cassette``).
``none``
    no kernel isolation: commands run on the host in the sandbox folder. The explicit opt-out,
    e.g. for tools that need the network or a background server kept across commands.

``terminal_backend="bwrap"`` asks for a ``local`` sandbox that requires isolation, whatever
the variable says (the simple way for a caller to get an isolated sandbox).
"""

from __future__ import annotations

import logging
import os

from ._bwrap import bwrap_problem
from ._limits import SandboxLimits

__all__ = [
    "ISOLATION_MODES",
    "ISOLATION_VAR",
    "IsolationUnavailableError",
    "SandboxLimits",
    "decide_isolation",
    "isolation_mode",
]

log = logging.getLogger(__name__)

ISOLATION_VAR = "HERMES_SANDBOX"
ISOLATION_MODES = ("auto", "bwrap", "none")


class IsolationUnavailableError(RuntimeError):
    """Isolation is required (``HERMES_SANDBOX=bwrap``) but bubblewrap does not work here."""


def isolation_mode() -> str:
    """The current policy: ``auto``, ``bwrap`` or ``none`` (from ``HERMES_SANDBOX``)."""
    value = os.environ.get(ISOLATION_VAR, "").strip().lower() or "auto"
    if value not in ISOLATION_MODES:
        raise ValueError(
            f"{ISOLATION_VAR}={value!r} is not a sandbox policy; use one of "
            f"{', '.join(ISOLATION_MODES)} (auto: bubblewrap where it works)"
        )
    return value


_WARNED = False


def decide_isolation(task_id: str, requested: str | None) -> bool:
    """Whether a new sandbox runs its commands in bwrap (policy in ``isolation``)."""
    global _WARNED
    mode = requested or isolation_mode()
    if mode == "none":
        return False
    problem = bwrap_problem()
    if problem is None:
        return True
    if mode == "bwrap":
        raise IsolationUnavailableError(
            f"task {task_id!r}: commands must run inside bubblewrap ({ISOLATION_VAR}=bwrap; "
            f"hermes-replay sets it while recording and replaying), but bwrap does not work "
            f"here: {problem}. Next step: install it (Debian/Ubuntu: `apt-get install "
            f"bubblewrap`). Only if you trust the commands, run them on the host instead: "
            f"replaying, `--trust-cassette` (CLI and pytest) or run_cassette(..., "
            f"trust_cassette=True); recording or a live run, {ISOLATION_VAR}=none."
        )
    if not _WARNED:
        _WARNED = True
        log.warning(
            "tool commands run WITHOUT kernel isolation (bubblewrap does not work here: %s); "
            "install bubblewrap to contain them, or set %s=none to silence this warning",
            problem, ISOLATION_VAR,
        )
    return False
