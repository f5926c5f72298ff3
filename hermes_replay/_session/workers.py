"""Worker identity: which environment worker of a deployment a rollout belongs to.

Atropos runs many environment workers with one configuration; they draw the same items, so a
rollout id made of item, occurrence and slot alone is the same in every worker. A worker's
identity (``w0``, ``w1`` … or any name) is therefore part of its rollout ids, as a suffix:
``train-3fa2c1d09b7e-0-2@w1``. The first worker, ``w0``, keeps the plain id, so a one-worker
run, a ``process`` recording and worker 0 of a deployment are interchangeable.

Where the identity comes from (the environment layer applies it, see ``environments._ids``):
the ``HERMES_REPLAY_WORKER`` variable (set by ``--worker NAME`` of record/replay/passthrough,
or by your launcher, e.g. ``HERMES_REPLAY_WORKER=w$SLURM_PROCID``), else the order in which
``serve`` workers registered with the trajectory API (atroposlib numbers same-named workers
0, 1, 2 …) — deterministic up to swapping workers of one configuration, which replay alike.

A session told its worker (``annotate(worker=…)``) treats recordings of other workers as not
its own: replaying one worker of a merged cassette does not report the others as unused.
"""

from __future__ import annotations

import re

__all__ = ["ENV_VAR", "FIRST", "check_name", "owner"]

ENV_VAR = "HERMES_REPLAY_WORKER"
FIRST = "w0"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_name(name: str) -> str:
    """``name`` if it can be a worker identity (a file name and an id suffix), else ValueError."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"bad worker name {name!r}: 1-64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit (e.g. w0, w1, …)")
    return name


def owner(rollout_id: str) -> str:
    """The worker that recorded ``rollout_id`` (``w0`` for a plain id)."""
    head, sep, tail = rollout_id.rpartition("@")
    return tail if sep and head else FIRST
