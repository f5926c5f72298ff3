"""Which recorded group a plain env's ``collect_trajectories(item)`` call is, in replay.

A group's id is ``train-<item hash>-<occurrence>`` (``_runner.plain_items``): the item's
content with its volatile values normalized, so an item with a new uuid or timestamp, or a
frozenset iterated in another order, is the same group in every run. Content cannot cover
everything an env may put in an item (a board from an unseeded RNG, a session token of its
own, a field whose meaning changed), so the recording also keeps, per group, the item's
position in the run's order of items (``draw``: the how-many-th ``get_next_item`` result it
was, as atroposlib draws them one after another) and its canonical text (``item``).

A replayed call is matched to a recorded group in this order:

1. the same content id (the normal case: nothing about the item changed, or only volatile
   values the normalizers cover);
2. the id an older cassette used (content hashed as ``json.dumps(item, default=repr)``), so a
   cassette recorded before canonical items replays as it did;
3. the recorded group drawn at the same position, when that one is not taken: its requests
   then decide, as for any rollout (a volatile value the model never saw changes nothing, one
   it saw misses with a request diff) — and the run says which fields of the item changed, and
   every miss of the group names them (old → new);
4. otherwise the item is new: its requests miss, and the miss names the nearest recorded item
   and the fields that differ, instead of "the cassette has no rollout".

Why content first and position second, not position alone: a content id is what a human reads
in ``ls``/``diff`` (the same item is the same group in two cassettes), it survives a reordered
dataset, and it keeps every cassette and snapshot recorded so far valid; the position covers
what content cannot.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_replay import _active
from hermes_replay._runner.plain_items import (
    ITEM_TEXT_LIMIT,
    canonical_text,
    item_changes,
    legacy_item_hash,
    normalized,
)
from hermes_replay._session.workers import ENV_VAR as WORKER_VARIABLE
from hermes_replay._session.workers import FIRST as FIRST_WORKER

__all__ = ["GroupResolver", "Resolution", "with_worker"]

_NEAREST_POOL = 200  # recorded items compared with a new one (a miss's message, not a hot path)


def with_worker(base: str) -> str:
    worker = os.environ.get(WORKER_VARIABLE, "").strip()
    return base if worker in ("", FIRST_WORKER) else f"{base}@{worker}"


def _without_worker(rid: str) -> str:
    return rid.split("@", 1)[0]


@dataclass(frozen=True)
class Resolution:
    """One group: its id base (no worker suffix), content hash, draw position and canonical
    text (None when longer than the cassette keeps), and what a miss of it should say."""

    base: str
    fingerprint: str
    draw: int | None
    item: str | None
    note: str | None = None
    label: str | None = None  # the item's readable name (``_cassette/labels.py``)

    def outcome(self) -> dict[str, Any]:
        """What the group's cassette record keeps about its item."""
        return {"draw": self.draw, **({"item": self.item} if self.item is not None else {}),
                **({"label": self.label} if self.label is not None else {})}


class GroupResolver:
    """Draw positions and group ids of one env instance (see the module docstring)."""

    def __init__(self, note: Callable[[str], None] | None = None) -> None:
        self._note = note
        self._pending: list[tuple[Any, int]] = []  # drawn items not yet collected, in order
        self._draws = 0
        self._counts: Counter[str] = Counter()
        self._legacy: Counter[str] = Counter()
        self._claimed: set[str] = set()
        self._recorded: dict[str, dict[str, Any]] | None = None
        self._loaded = False

    def drawn(self, item: Any) -> None:
        """``get_next_item`` returned ``item``: its position is the next one."""
        if item is None:
            return
        self._pending.append((item, self._draws))
        self._draws += 1
        del self._pending[:-256]  # drawn and never collected (evaluation, a cancelled worker)

    def _draw_of(self, item: Any) -> int | None:
        """The position ``item`` was drawn at (the object itself: a string drawn twice is two
        positions, taken in order); None for items not from ``get_next_item`` (backlog)."""
        for i, (drawn, position) in enumerate(self._pending):
            if drawn is item:
                del self._pending[i]
                return position
        return None

    def _recorded_groups(self) -> dict[str, dict[str, Any]] | None:
        """The cassette's plain groups (replay and auto), or None when nothing was recorded."""
        if not self._loaded:
            self._loaded = True
            session = _active.current()
            groups = getattr(session, "recorded_groups", None)
            if callable(groups) and getattr(session, "mode", None) in ("replay", "auto"):
                self._recorded = groups()
        return self._recorded

    def open(self, item: Any) -> Resolution:
        text = canonical_text(item)
        fingerprint = hashlib.sha256(normalized(text).encode("utf-8")).hexdigest()[:12]
        base = f"train-{fingerprint}-{self._counts[fingerprint]}"
        self._counts[fingerprint] += 1
        legacy_hash = legacy_item_hash(item)
        legacy = f"train-{legacy_hash}-{self._legacy[legacy_hash]}"
        self._legacy[legacy_hash] += 1
        draw = self._draw_of(item)
        kept = text if len(text) <= ITEM_TEXT_LIMIT else None
        recorded = self._recorded_groups()
        if not recorded:
            return Resolution(base, fingerprint, draw, kept)
        for candidate in (base, legacy):
            if self._take(with_worker(candidate), recorded):
                return Resolution(candidate, fingerprint, draw, kept)
        extra = self._extra_rewrites()
        if draw is not None:
            mine = with_worker("")  # "" or "@w1": another worker's groups are not this one's
            for rid, outcome in recorded.items():
                if outcome.get("draw") == draw and rid.endswith(mine) and \
                        ("@" in rid) == bool(mine) and self._take(rid, recorded):
                    changes = (item_changes(str(outcome["item"]), text, extra)
                               if isinstance(outcome.get("item"), str) else [])
                    note = None
                    if changes:
                        note = (f"the item drawn {_ordinal(draw)} changed since it was "
                                f"recorded (group {rid}): {'; '.join(changes)}")
                        if self._note is not None:
                            self._note(f"{note} — replayed as that group, by its position")
                    return Resolution(_without_worker(rid), fingerprint, draw, kept, note)
        return Resolution(base, fingerprint, draw, kept, self._new_item(text, recorded, extra))

    def _take(self, rid: str, recorded: dict[str, dict[str, Any]]) -> bool:
        if rid in recorded and rid not in self._claimed:
            self._claimed.add(rid)
            return True
        return False

    def _new_item(self, text: str, recorded: dict[str, dict[str, Any]],
                  extra: tuple[tuple[str, str], ...]) -> str:
        shown = text if len(text) <= 100 else text[:97] + "..."
        pool = [(rid, o["item"]) for rid, o in recorded.items()
                if isinstance(o.get("item"), str)][:_NEAREST_POOL]
        head = f"this item was not recorded ({shown})"
        if not pool:
            return (f"{head}: the cassette has {len(recorded)} group(s) and none with this "
                    "item; re-record if the items changed on purpose")
        target = normalized(text, extra)
        rid, old = max(pool, key=lambda p: difflib.SequenceMatcher(
            None, normalized(p[1], extra), target, autojunk=False).quick_ratio())
        changes = item_changes(old, text, extra) or ["(only values the normalizers cover)"]
        return (f"{head}; the nearest recorded item (group {rid}) differs: "
                f"{'; '.join(changes)}")

    @staticmethod
    def _extra_rewrites() -> tuple[tuple[str, str], ...]:
        """The cassette's own normalizers, so a volatile value the user named is no change."""
        matcher = getattr(_active.current(), "matcher", None)
        return tuple(getattr(matcher, "normalizers", ()) or ())


def _ordinal(draw: int) -> str:
    n = draw + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
