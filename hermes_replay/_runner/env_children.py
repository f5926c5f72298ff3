"""Ending the child processes that the envs a worker ran left behind.

An env may make a ``ProcessPoolExecutor`` in ``setup`` and never shut it down
(math_server_zero grades in one). Its own ``python -m … process`` ends such a pool at
interpreter exit, where ``concurrent.futures`` shuts executors down before anything waits for
children. hermes-replay's workers end otherwise, and each way left the pool running:

- a ``replay -j`` worker (a multiprocessing process) joins every child process before
  executors are shut down, so it waited on the idle pool until the parent killed it, 30 s a
  worker, and the pool's fork server and worker ran on with no parent;
- a warm worker (``watch``) ends with ``os._exit``, and the pool's processes, blocked on a
  queue whose other end they hold themselves, ran on for good: one more set per save.

A worker calls :func:`end_env_children` once its last job is done: whatever child is left is
only waiting to be told to stop.
"""

from __future__ import annotations

import multiprocessing
import os

__all__ = ["end_env_children"]


def end_env_children(grace: float = 5) -> None:
    """Terminate the multiprocessing children this process started, then kill the ones still
    there after ``grace`` seconds."""
    # a plain os.fork (the warm worker) inherits its parent's list of children: only ours
    me = os.getpid()
    children = [c for c in multiprocessing.active_children()
                if getattr(c, "_parent_pid", me) == me]
    for child in children:
        child.terminate()
    for child in children:
        child.join(grace)
        if child.is_alive():
            child.kill()
            child.join(grace)
