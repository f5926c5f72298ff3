"""Rollouts by name: a readable label from the item, shown beside the id.

A rollout's id (``train-98db0bb744d7-0-1``) is its identity — content-addressed, the same in
every process — but not what an author thinks in: the item's own id (``fib_20``) is. The
label is taken when the rollout is recorded and kept in its outcome (``label``); every view
(ls, show, watch, snapshot text, diff, the report) shows it beside the id. Ids stay the
identity: nothing matches, sorts or keys on a label, and a rollout without one shows as before.

Where a label comes from (:func:`rollout_label`): the env's own ``rollout_label(item)`` hook
when it defines one; else the first of :data:`LABEL_KEYS` that the item (a mapping, or a
``frozenset`` of pairs as Atropos envs build them) holds as a short string or number.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["LABEL_KEYS", "labels", "named", "rollout_label"]

LABEL_KEYS = ("id", "name", "task_id", "item_id", "problem_id", "question_id", "instance_id",
              "uid", "slug", "title")
MAX_LABEL = 48  # characters shown; a longer value is cut with "…"

_warned: set[str] = set()


def _short(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = " ".join(str(value).split())
    if not text:
        return None
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _as_mapping(item: Any) -> Mapping[Any, Any] | None:
    if isinstance(item, Mapping):
        return item
    if isinstance(item, (frozenset, set)) and all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in item):
        return dict(item)
    return None


def rollout_label(item: Any, env: Any = None) -> str | None:
    """The label of the rollout(s) of ``item``: ``env.rollout_label(item)`` when the env
    defines that hook, else the item's own id-like field (see :data:`LABEL_KEYS`), else None.
    Never raises: a hook that fails gives no label (logged once), never a failed rollout.
    Public as ``hermes_replay.rollout_label``."""
    hook = getattr(env, "rollout_label", None) if env is not None else None
    if callable(hook):
        try:
            return _short(hook(item))
        except Exception as exc:  # a label is a display aid: it never fails a run
            key = type(env).__name__
            if key not in _warned:
                _warned.add(key)
                logging.getLogger(__name__).warning(
                    "hermes-replay: %s.rollout_label raised %s: %s; its rollouts show no label",
                    key, type(exc).__name__, exc)
            return None
    mapping = _as_mapping(item)
    if mapping is None:
        return None
    for key in LABEL_KEYS:
        label = _short(mapping.get(key))
        if label is not None:
            return label
    return None


def labels(outcomes: Mapping[str, Any]) -> dict[str, str]:
    """Rollout id -> label, from outcome records (a cassette's, or a run's): a rollout's own
    ``label``, else its group's (a plain env's group record names its ``rollouts``)."""
    own: dict[str, str] = {}
    groups: list[tuple[str, list[Any]]] = []
    for rid, outcome in outcomes.items():
        if not isinstance(outcome, Mapping):
            continue
        label = _short(outcome.get("label"))
        if label is None:
            continue
        own[str(rid)] = label
        members = outcome.get("rollouts") if outcome.get("kind") == "group" else None
        if isinstance(members, list):
            groups.append((label, members))
    for label, members in groups:  # a rollout's own label wins over its group's
        for member in members:
            own.setdefault(str(member), label)
    return own


def named(rollout_id: str, label: str | None) -> str:
    """``id (label)``, or the id alone."""
    return f"{rollout_id} ({label})" if label else rollout_id
