"""Rollout identity and rewards for plain atroposlib environments, given by the harness.

A ``HermesAgentBaseEnv`` opens a rollout scope per slot itself. A plain ``BaseEnv`` subclass
knows nothing of hermes-replay, so the harness wraps the two calls every Atropos environment
is driven through, on the instance it runs (the class and the file stay untouched):

- ``collect_trajectories(item)`` → a **group** scope ``train-<item hash>-<occurrence>``. The
  requests made inside it (one ``chat_completion(n=group_size)``, a ``completion``, a
  ``managed_server`` conversation…) are keyed by it and their order in it, so concurrent groups
  never swap answers. When it returns, each score of the returned ``ScoredDataGroup`` becomes
  a rollout ``train-<hash>-<occurrence>-<slot>`` in the cassette (its traffic is the group's),
  and the group keeps its whole score list.
- ``collect_trajectory(item)`` (atroposlib's default ``collect_trajectories`` calls it
  ``group_size`` times at once) → a **rollout** scope ``…-<slot>`` of the enclosing group, its
  slot the order in which the calls started (deterministic: asyncio starts gathered tasks in
  order), its reward the returned ``ScoredDataItem``'s score.

The item hash is the item's canonical JSON with its volatile values normalized
(``_runner.plain_items``: the same under every ``PYTHONHASHSEED``, with new uuids and
timestamps), the occurrence how often this env instance has drawn that item — ids read as the
Hermes layer's do. ``get_next_item`` is wrapped too: each group also keeps the item's position
in the run's order of items and its canonical text, and a replay matches a group whose content
changed by that position (``_runner.plain_resolve``), naming the fields that changed.
A group that comes back empty (every rollout filtered by ``score()``) is counted: atroposlib's
``process`` loop retries such a group forever, so after ``HERMES_REPLAY_MAX_EMPTY_GROUPS``
(default 20) empty groups in a row the run stops with :class:`EveryGroupDropped`, saying why and
what to do. In ``serve``, atroposlib's ``handle_env`` catches every exception of
``collect_trajectories`` and logs it, and ``env_manager`` keeps drawing items while the trainer
waits for data that never comes; so the harness also wraps ``env_manager``, and the bound
tripping inside a worker ends it with the same error. A return value atroposlib 0.4.0 cannot
take stops the run the same way, naming it (``_runner.plain_shapes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_replay import _active
from hermes_replay._errors import HermesReplayError
from hermes_replay._runner.plain_attrib import attribute, candidates_of
from hermes_replay._runner.plain_items import item_hash
from hermes_replay._runner.plain_resolve import GroupResolver, Resolution, with_worker
from hermes_replay._runner.plain_shapes import at_odds, shape_problem
from hermes_replay._session.scope import rollout

__all__ = ["DEFAULT_MAX_EMPTY_GROUPS", "MAX_EMPTY_VARIABLE", "EveryGroupDropped", "GroupIdentity",
           "item_hash"]

MAX_EMPTY_VARIABLE = "HERMES_REPLAY_MAX_EMPTY_GROUPS"
DEFAULT_MAX_EMPTY_GROUPS = 20


class EveryGroupDropped(HermesReplayError):
    """A plain env's ``collect_trajectories`` returned no group too many times in a row."""


@dataclass
class _Group:
    """One ``collect_trajectories`` call in progress (shared by the tasks it spawns)."""

    resolved: Resolution
    slots: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:  # train-<hash>-<occurrence>, no worker suffix
        return self.resolved.base

    @property
    def fingerprint(self) -> str:
        return self.resolved.fingerprint

    def next_slot(self) -> str:
        rid = with_worker(f"{self.base}-{len(self.slots)}")
        self.slots.append(rid)
        _note_misses(rid, self.resolved.note)
        return rid


_GROUP: contextvars.ContextVar[_Group | None] = contextvars.ContextVar(
    "hermes_replay_plain_group", default=None)


def _groups_of(result: Any) -> Any:
    """The scored part of what ``collect_trajectories`` returns (``(groups, backlog)``)."""
    return result[0] if isinstance(result, tuple) and result else result


def _scores(groups: Any) -> list[float | None]:
    """Every rollout's score, in order, from a ScoredDataGroup or a list of them."""
    if isinstance(groups, dict):
        raw = groups.get("scores")
        return [_number(s) for s in raw] if isinstance(raw, (list, tuple)) else []
    if isinstance(groups, (list, tuple)):
        return [s for g in groups for s in _scores(g)]
    return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy / torch scalars
            return float(value)
        except (TypeError, ValueError):
            return None
    return float(value)


def _is_empty(groups: Any) -> bool:
    """What atroposlib's process loop treats as 'failed to process group'."""
    if isinstance(groups, (list, tuple)):
        return all(_is_empty(g) for g in groups)
    return not groups


class GroupIdentity:
    """The wrappers installed on one plain env instance (see the module docstring)."""

    def __init__(self, env: Any, max_empty: int | None = None,
                 note: Callable[[str], None] | None = None) -> None:
        self.env_name = type(env).__name__
        self._env = env  # its tokenizer reads the scored entries (``plain_attrib``)
        self.skipped_groups: list[str] = []  # groups atroposlib skips, with its reason
        self.resolver = GroupResolver(note)
        self._custom_postprocess = _overrides(env, "postprocess_histories")
        self.max_empty = max_empty if max_empty is not None else _max_empty_from_env()
        self.empty_in_a_row = 0
        self.empty_total = 0
        self.tripped: HermesReplayError | None = None
        self._tripped_event: asyncio.Event | None = None  # set while env_manager runs

    def install(self, env: Any) -> None:
        """Shadow the two methods on the instance: ``self.collect_trajectory(item)`` inside
        atroposlib's default ``collect_trajectories`` then finds the wrapped one."""
        for name, wrapper in (("collect_trajectories", self._collect_trajectories),
                              ("collect_trajectory", self._collect_trajectory),
                              ("get_next_item", self._get_next_item)):
            bound = getattr(env, name, None)
            if bound is None:
                continue
            env.__dict__[name] = functools.wraps(bound)(functools.partial(wrapper, bound))
        manager = getattr(env, "env_manager", None)
        if manager is not None:
            env.__dict__["env_manager"] = functools.wraps(manager)(
                functools.partial(self._env_manager, manager))

    async def _env_manager(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``serve``'s loop, ended when the empty-group bound trips in one of its workers (whose
        exception atroposlib's ``handle_env`` would only log)."""
        tripped = self._tripped_event = asyncio.Event()
        main = asyncio.ensure_future(original(*args, **kwargs))
        waiter = asyncio.ensure_future(tripped.wait())
        try:
            await asyncio.wait({main, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await main
            self._tripped_event = None
        if self.tripped is not None:
            raise self.tripped
        return main.result()

    async def _get_next_item(self, original: Callable[..., Any], *args: Any,
                             **kwargs: Any) -> Any:
        item = await original(*args, **kwargs)
        self.resolver.drawn(item)
        return item

    def _open_group(self, item: Any) -> _Group:
        group = _Group(self.resolver.open(item))
        _note_misses(with_worker(group.base), group.resolved.note)
        return group

    async def _collect_trajectories(self, original: Callable[..., Any], item: Any,
                                    *args: Any, **kwargs: Any) -> Any:
        group = self._open_group(item)
        token = _GROUP.set(group)
        group_id = with_worker(group.base)
        answers = _follow(group_id)
        try:
            with rollout(group_id) as scope:
                result = await original(item, *args, **kwargs)
                self._check_shape(result)
                scores = _scores(_groups_of(result))
                if group.slots:  # collect_trajectory calls reported their own rewards
                    rollouts = list(group.slots)
                    fields: dict[str, Any] = {}
                else:  # the group's completions: each rollout's reward by content
                    rollouts, fields = self._by_content(group, group_id, result, answers)
                scope.report(kind="group", phase="train", group=group.fingerprint,
                             scores=scores if not _is_empty(_groups_of(result)) else None,
                             rollouts=rollouts, **fields, **group.resolved.outcome())
        finally:
            _GROUP.reset(token)
            _unfollow(group_id)
        self._count(_groups_of(result), item)
        return result

    def _by_content(self, group: _Group, group_id: str, result: Any,
                    answers: list[tuple[int, dict[str, Any]]] | None
                    ) -> tuple[list[str], dict[str, Any]]:
        """One rollout per completion of the group (``plain_attrib``), each with the score of
        the entry that holds it; the group's record says what matched nothing."""
        merged = _merged(_groups_of(result))
        cands = candidates_of(answers) if answers is not None else None
        found = attribute(merged, cands, getattr(self._env, "tokenizer", None))
        skipped = self._skipped(_groups_of(result))
        turns = _answered(group_id)
        scores = merged["scores"]
        rollouts = []
        for slot, unit in enumerate(found.units):
            rid = with_worker(f"{group.base}-{slot}")
            rollouts.append(rid)
            score = _number(scores[unit.entry]) if unit.entry is not None else None
            own: dict[str, Any] = {"attribution": unit.how or "dropped"}
            if unit.candidates:
                own["samples"] = [[c.seq, c.sample] for c in unit.candidates]
                own["choice"] = cands.index(unit.candidates[0]) if cands else slot
            else:
                own["choice"] = slot
            if unit.entry is None:
                own["dropped"] = ("score() returned no entry holding this completion (a "
                                  "length filter, a None score, …)"
                                  + (f"; {skipped}" if skipped and found.units else ""))
            elif skipped:  # atroposlib skips the whole group: no reward reaches a trainer
                own.update(dropped=skipped, env_score=score)
                score = None
            if unit.ambiguous:
                own["ambiguous"] = ("another completion has the same text but a different "
                                    "score: which score is whose cannot be told")
            with rollout(rid) as one:
                one.report(reward=score, phase="train", group=group.fingerprint,
                           traffic=group_id, **own,
                           **({} if turns is None else {"turns_used": turns}))
        fields: dict[str, Any] = {}
        if found.unmatched_entries:
            fields["unmatched_entries"] = found.unmatched_entries
        if skipped:
            fields["dropped"] = skipped
            self.skipped_groups.append(f"{group.base}: {skipped}")
        return rollouts, fields

    def _skipped(self, groups: Any) -> str | None:
        """Why atroposlib's ``handle_send_to_api`` skips this returned group (its own checks,
        in its words), or None when it takes it."""
        if _is_empty(groups):
            return "score() returned no group (atroposlib retries with another item)"
        config = getattr(self._env, "config", None)
        parts = groups if isinstance(groups, (list, tuple)) else [groups]
        for part in (p for p in parts if isinstance(p, dict)):
            overrides = part.get("group_overrides") or {}
            size = overrides.get("group_size") if isinstance(overrides, dict) else None
            size = size or getattr(config, "group_size", None)
            count = len(part.get("tokens") or [])
            if isinstance(size, int) and count != size:
                return (f"atroposlib skipped the group: token count mismatch ({count} entries, "
                        f"group_size {size})")
            scores = _scores(part)
            if getattr(config, "ensure_scores_are_not_same", False) and len(scores) > 1 \
                    and len(set(scores)) == 1:
                return "atroposlib skipped the group: every score is the same"
        return None

    async def _collect_trajectory(self, original: Callable[..., Any], item: Any,
                                  *args: Any, **kwargs: Any) -> Any:
        group = _GROUP.get()
        if group is None:  # called on its own, not from collect_trajectories: a group of one
            group = self._open_group(item)
        with rollout(group.next_slot()) as scope:
            result = await original(item, *args, **kwargs)
            scored = _groups_of(result)
            score = _number(scored.get("scores")) if isinstance(scored, dict) else None
            turns = _answered(scope.id)
            scope.report(reward=score, phase="train", group=group.fingerprint,
                         **({} if isinstance(scored, dict) else {"dropped": True}),
                         **({} if turns is None else {"turns_used": turns}))
        return result

    def _check_shape(self, result: Any) -> None:
        """Stop at a return value atroposlib 0.4.0 cannot take (``plain_shapes``)."""
        problem = shape_problem(result, self._custom_postprocess)
        if problem is not None:
            self._trip(at_odds(self.env_name, result, problem))

    def _trip(self, error: HermesReplayError) -> None:
        """Raise ``error``, and end ``serve``'s loop with it (``handle_env`` only logs it)."""
        self.tripped = error
        if self._tripped_event is not None:
            self._tripped_event.set()
        raise error

    def _count(self, groups: Any, item: Any) -> None:
        if not _is_empty(groups):
            self.empty_in_a_row = 0
            return
        self.empty_in_a_row += 1
        self.empty_total += 1
        if self.max_empty > 0 and self.empty_in_a_row >= self.max_empty:
            self._trip(EveryGroupDropped(dropped_message(self.env_name, self.empty_in_a_row,
                                                         item)))


def _overrides(env: Any, name: str) -> bool:
    """True when ``env``'s class defines ``name`` itself, not atroposlib's ``BaseEnv``."""
    try:
        from atroposlib.envs.base import BaseEnv
    except ImportError:
        return False
    mine = getattr(type(env), name, None)
    return mine is not None and mine is not getattr(BaseEnv, name, None)


def _note_misses(rollout_id: str, note: str | None) -> None:
    """Have every miss of ``rollout_id`` say what changed in its item (``plain_resolve``)."""
    session = _active.current()
    add = getattr(session, "note_item", None)
    if note and callable(add):
        add(rollout_id, note)


def _merged(groups: Any) -> dict[str, Any]:
    """The returned group(s) as one: entries (tokens, masks, messages, scores) in order."""
    parts = [g for g in (groups if isinstance(groups, (list, tuple)) else [groups])
             if isinstance(g, dict)]
    merged: dict[str, Any] = {"scores": _scores(groups)}
    for key in ("tokens", "masks", "messages"):
        values = [g.get(key) for g in parts]
        if all(isinstance(v, list) for v in values) and values:
            merged[key] = [x for v in values for x in v]
    return merged


def _follow(rollout_id: str) -> list[tuple[int, dict[str, Any]]] | None:
    session = _active.current()
    follow = getattr(session, "follow_answers", None)
    return follow(rollout_id) if callable(follow) and session.mode != "passthrough" else None


def _unfollow(rollout_id: str) -> None:
    session = _active.current()
    unfollow = getattr(session, "unfollow", None)
    if callable(unfollow):
        unfollow(rollout_id)


def _answered(rollout_id: str) -> int | None:
    """The model requests answered inside ``rollout_id``'s scope: a plain rollout's turns."""
    session = _active.current()
    answered = getattr(session, "answered_in", None)
    return answered(rollout_id) if callable(answered) else None


def dropped_message(env_name: str, count: int, item: Any) -> str:
    shown = repr(item)
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return (
        f"{env_name}.collect_trajectories returned no group {count} times in a row (the last "
        f"item: {shown}): the env dropped every group, so atroposlib would retry forever "
        "('Failed to process group, retrying...'). Checks that typically drop every group in "
        "score(): a length filter (every completion longer than max_token_length, or the "
        "prompt alone over it), too few trained tokens (masks all -100), identical scores "
        "(a group whose rollouts all scored the same is returned as None).\n"
        "  next step: look at score() with the env log (-v shows it), give the model room "
        "(--env.max_token_length) or fix the filter; to allow more empty groups in a row set "
        f"{MAX_EMPTY_VARIABLE}=N (0 = no bound)")


def _max_empty_from_env() -> int:
    raw = os.environ.get(MAX_EMPTY_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX_EMPTY_GROUPS
    try:
        return max(0, int(raw))
    except ValueError:
        raise EveryGroupDropped(f"{MAX_EMPTY_VARIABLE}={raw!r} is not a whole number; set it to "
                                "the number of empty groups in a row to allow (0 = no bound)"
                                ) from None
