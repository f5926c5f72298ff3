"""Which isolation the tools of a run get: the ``HERMES_SANDBOX`` policy hermes-replay sets.

hermes_replay does not run tools itself; the environment's sandbox reads ``HERMES_SANDBOX``
when it creates a sandbox (``environments.tools.sandbox.isolation``). While hermes-replay runs
an environment it sets the variable, so a cassette's or a live endpoint's commands run inside
bubblewrap, or fail with a message saying how to get it:

- replaying (``replay``/``auto``): the commands come from a cassette — data from outside. They
  run isolated (``bwrap``), whatever the user's own ``HERMES_SANDBOX`` says, unless the run is
  given ``trust_cassette`` (``--trust-cassette``): then they run on the host (``none``).
- recording and pass-through: the commands come from the live model. Isolated too, unless
  ``trust_cassette`` or the user's own ``HERMES_SANDBOX=none`` (the opt-out for the author's
  own live runs) says otherwise.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ISOLATION_VAR", "isolation_unless_decided", "tool_isolation"]

ISOLATION_VAR = "HERMES_SANDBOX"


def policy_for(mode: str, trust_cassette: bool, user_setting: str | None) -> str:
    """The ``HERMES_SANDBOX`` value a run in ``mode`` gets."""
    if trust_cassette:
        return "none"
    if mode in ("record", "passthrough") and (user_setting or "").strip().lower() == "none":
        return "none"
    return "bwrap"


_LOCK = threading.Lock()
_HELD: list[str] = []  # policies of the runs in progress in this process
_SAVED: list[str | None] = []  # the user's own value, while any run holds a policy


@contextmanager
def tool_isolation(mode: str, trust_cassette: bool = False) -> Iterator[str]:
    """Set ``HERMES_SANDBOX`` for the run; restore the user's value when the last run ends.

    Runs may overlap in one process (threads, ``asyncio``): the variable is then ``bwrap``
    while any of them requires isolation, and the user's value comes back only at the end.
    """
    with _LOCK:
        if not _HELD:
            _SAVED[:] = [os.environ.get(ISOLATION_VAR)]
        policy = policy_for(mode, trust_cassette, _SAVED[0])
        _HELD.append(policy)
        _apply()
    try:
        yield policy
    finally:
        with _LOCK:
            _HELD.remove(policy)
            _apply()


def _apply() -> None:
    if _HELD:
        os.environ[ISOLATION_VAR] = "bwrap" if "bwrap" in _HELD else "none"
    elif _SAVED[0] is None:
        os.environ.pop(ISOLATION_VAR, None)
    else:
        os.environ[ISOLATION_VAR] = _SAVED[0]


@contextmanager
def isolation_unless_decided(mode: str) -> Iterator[None]:
    """Around one executed tool call: the policy of ``mode``, unless a run has set one.

    ``run_cassette`` and the CLI set the policy for the whole run (they know
    ``trust_cassette``); a bare ``cassette()`` block executing a cassette's tools does not, so
    each executed call is isolated as a replay is.
    """
    with _LOCK:
        decided = bool(_HELD)
    if decided:
        yield
        return
    with tool_isolation(mode):
        yield
