"""Keep evaluation out of training metric buffers, automatically.

The seed's pitfall: ``compute_reward`` appends to ``self._reward_buffer`` (or similar), and
``evaluate`` calls ``compute_reward`` too, so eval rollouts leak into the next ``train/*`` numbers.

The fix lives in the base class, not in every environment:

* ``evaluation()`` marks the current task (a ``contextvars`` flag, so rollouts running
  concurrently for training are *not* marked) — ``HermesAgentBaseEnv`` enters it around every
  ``evaluate``.
* For the duration, each metric buffer of the env (attributes named in ``metric_buffers`` or ending
  in ``_buffer``) is protected:
  - a ``list`` is swapped for a :class:`GuardedList` holding the same items: writes made from an
    evaluation context are diverted to a side list, writes from training contexts land normally
    (so training that runs alongside eval, with ``eval_handling`` NONE/LIMIT_TRAIN, keeps its
    entries). Afterwards the attribute is a plain list again.
  - any other buffer (dict, deque, counter …) is deep-copied before and restored after.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_IN_EVAL: contextvars.ContextVar[bool] = contextvars.ContextVar("hermes_in_eval", default=False)


def in_evaluation() -> bool:
    """True inside ``evaluate`` (and every task it spawned)."""
    return _IN_EVAL.get()


class GuardedList(list):
    """A list whose mutations from an evaluation context are recorded aside, not applied."""

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.diverted: list[Any] = []

    def append(self, value: Any) -> None:
        if in_evaluation():
            self.diverted.append(value)
        else:
            super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        if in_evaluation():
            self.diverted.extend(values)
        else:
            super().extend(values)

    def insert(self, index: Any, value: Any) -> None:
        if in_evaluation():
            self.diverted.append(value)
        else:
            super().insert(index, value)

    def __iadd__(self, values: Iterable[Any]) -> GuardedList:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def _guard(name: str):
        def method(self: GuardedList, *args: Any, **kwargs: Any) -> Any:
            if in_evaluation():
                return None
            return getattr(super(), name)(*args, **kwargs)

        method.__name__ = name
        return method

    # Clearing or rewriting a training buffer from inside evaluate is ignored for the same reason.
    clear = _guard("clear")
    pop = _guard("pop")
    remove = _guard("remove")
    __setitem__ = _guard("__setitem__")
    __delitem__ = _guard("__delitem__")
    del _guard


def buffer_names(env: Any, declared: Iterable[str]) -> list[str]:
    """Declared buffers plus every instance attribute whose name ends in ``_buffer``."""
    names = [n for n in declared if hasattr(env, n)]
    for name, value in vars(env).items():
        if (name.endswith("_buffer") and name not in names and hasattr(value, "__len__")
                and not isinstance(value, (str, bytes))):
            names.append(name)
    return names


@contextmanager
def evaluation(env: Any, declared: Iterable[str] = ()) -> Iterator[None]:
    """Run a block as evaluation: flag the context and protect the env's training buffers."""
    if in_evaluation():  # nested (a subclass's evaluate calling super().evaluate)
        yield
        return
    token = _IN_EVAL.set(True)
    guarded: dict[str, GuardedList] = {}
    snapshots: dict[str, Any] = {}
    for name in buffer_names(env, declared):
        value = getattr(env, name)
        if type(value) is list:
            guarded[name] = GuardedList(value)
            setattr(env, name, guarded[name])
        else:
            snapshots[name] = copy.deepcopy(value)
    try:
        yield
    finally:
        _IN_EVAL.reset(token)
        for name, glist in guarded.items():
            current = getattr(env, name)
            if current is glist:
                setattr(env, name, list(glist))
            # else: the env rebound the attribute itself (e.g. ``self._x_buffer = []`` in
            # wandb_log from a training task) — that new object is training state; keep it.
        for name, snap in snapshots.items():
            setattr(env, name, snap)
