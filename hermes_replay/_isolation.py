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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ISOLATION_VAR", "tool_isolation"]

ISOLATION_VAR = "HERMES_SANDBOX"


def policy_for(mode: str, trust_cassette: bool, user_setting: str | None) -> str:
    """The ``HERMES_SANDBOX`` value a run in ``mode`` gets."""
    if trust_cassette:
        return "none"
    if mode in ("record", "passthrough") and (user_setting or "").strip().lower() == "none":
        return "none"
    return "bwrap"


@contextmanager
def tool_isolation(mode: str, trust_cassette: bool = False) -> Iterator[str]:
    """Set ``HERMES_SANDBOX`` for the run; restore the user's value afterwards."""
    saved = os.environ.get(ISOLATION_VAR)
    policy = policy_for(mode, trust_cassette, saved)
    os.environ[ISOLATION_VAR] = policy
    try:
        yield policy
    finally:
        if saved is None:
            os.environ.pop(ISOLATION_VAR, None)
        else:
            os.environ[ISOLATION_VAR] = saved
