"""What makes a replay bounded and offline, in one place for every runner (CLI, pytest
plugin, ``run_cassette``): non-loopback sockets and DNS refused (``_runner.netblock``), a run that
stops making progress stopped (``_runner.stall``). Health checks are answered by the session
(``_session.health``) and turned off in the replayed argv (``_plan.replay_argv``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from hermes_replay._runner.netblock import block_network
from hermes_replay._runner.stall import DEFAULT_MAX_MISSES, stall_guard

__all__ = ["DEFAULT_MAX_MISSES", "offline_replay"]


@contextmanager
def offline_replay(session: Any, *, allow_network: bool = False,
                   max_misses: int = DEFAULT_MAX_MISSES) -> Iterator[None]:
    """Inside the block (a replay of ``session``): loopback only, unless ``allow_network``;
    stopped with ``ReplayStalled`` after ``max_misses`` misses without progress."""
    with ExitStack() as stack:
        if getattr(session, "mode", "replay") == "replay" and not allow_network:
            stack.enter_context(block_network())
        stack.enter_context(stall_guard(session, max_misses=max_misses))
        yield
