"""``--worker NAME``: this environment worker's identity in a deployment (record and replay).

The identity reaches the environment as ``HERMES_REPLAY_WORKER`` (the env layer puts it in its
rollout ids) and the session as its ``worker`` option (see ``hermes_replay._session.workers``).
Without the flag a launcher may set the variable itself; in ``serve`` the identity is
otherwise derived from the order in which workers registered with the trajectory API.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from hermes_replay._session.workers import ENV_VAR, check_name

__all__ = ["add_worker_flag", "given_worker", "worker_variable"]


def add_worker_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker", metavar="NAME",
        help=f"this worker's identity in a deployment of several (w0, w1, …): part of its "
        f"rollout ids and, when recording, its shard name. Default: ${ENV_VAR}, else in serve "
        "the order workers registered with the trajectory API")


def given_worker(prog: str, args: argparse.Namespace) -> str | int | None:
    """The identity from ``--worker`` or the variable; 2 (a usage error, printed) if bad."""
    name = getattr(args, "worker", None) or os.environ.get(ENV_VAR, "").strip() or None
    if name is None:
        return None
    try:
        return check_name(name)
    except ValueError as exc:
        print(f"hermes-replay {prog}: {exc}", file=sys.stderr)
        return 2


@contextmanager
def worker_variable(name: str | None) -> Iterator[None]:
    """``HERMES_REPLAY_WORKER=name`` while the environment runs (restored afterwards)."""
    if name is None:
        yield
        return
    saved = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = name
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved
