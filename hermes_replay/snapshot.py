"""A syrupy extension that stores a run's rewards as a readable table.

One line per rollout, each naming its rollout id, so a changed reward shows in pytest's
output as a one-line diff that says which rollout moved; ``--snapshot-update`` accepts
it. Floats are fixed to a few decimals and timing metrics are left out, so snapshot
files are identical across runs and machines.

    from hermes_replay.snapshot import RolloutSnapshotExtension

    def test_rewards(replay_run, snapshot):
        assert replay_run() == snapshot(extension_class=RolloutSnapshotExtension)

A run with no rollouts, or one that failed (``replay_run(raise_errors=False)`` hands those
back), is refused: its table would be empty or partial, and accepting it with
``--snapshot-update`` would hide every later reward change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from hermes_replay._cassette.labels import named
from hermes_replay._cassette.parts import parts_changes
from hermes_replay._errors import HermesReplayError
from hermes_replay._runner.result import RunResult
from hermes_replay._runner.snapshot_text import (
    FORMAT_LINE,
    render_run,
    snapshot_labels,
    snapshot_parts,
    snapshot_table,
    without_labels,
)

__all__ = ["RolloutSnapshotExtension", "failed_reward_snapshots", "render_run",
           "reward_changes"]

def _refuse_a_run_that_proves_nothing(result: RunResult) -> None:
    where = f"{result.cassette}: " if result.cassette else ""
    if result.error is not None:
        raise HermesReplayError(
            f"{where}refusing to snapshot a run that failed "
            f"({type(result.error).__name__}: {str(result.error).splitlines()[0]}); next step: "
            "fix what the error says — a failed run's rewards are not a reference")
    if not result.rollouts:
        raise HermesReplayError(
            f"{where}refusing to snapshot a run with no rollouts (exit code "
            f"{result.exit_code}): an empty table would accept any later reward change; next "
            "step: make the replay run its rollouts (see the env log in "
            f"{result.out_dir or 'the run folder'})")


class RolloutSnapshotExtension(SingleFileSnapshotExtension):
    """Stores ``RunResult`` objects as ``<test name>.rollouts.txt`` beside the test."""

    file_extension = "rollouts.txt"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **kwargs: Any) -> str:
        if isinstance(data, RunResult):
            _refuse_a_run_that_proves_nothing(data)
            text = render_run(data)
            if data.cassette is not None:  # so a failed comparison can show the replies
                _CASSETTES[text] = Path(data.cassette)
                while len(_CASSETTES) > 64:
                    del _CASSETTES[next(iter(_CASSETTES))]
            return text
        if isinstance(data, str):
            return data
        raise TypeError(
            "RolloutSnapshotExtension snapshots a hermes_replay RunResult, got "
            f"{type(data).__name__}; pass the object returned by the replay_run fixture."
        )


    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        """Equal tables, labels aside: ids are the identity, a label only names the item."""
        if isinstance(serialized_data, str) and isinstance(snapshot_data, str):
            return without_labels(serialized_data) == without_labels(snapshot_data)
        return bool(super().matches(serialized_data=serialized_data,
                                    snapshot_data=snapshot_data))


# a rendered run -> the cassette it replayed (the newest 64): the snapshot text holds ids and
# numbers only, and a moved reward is read beside the reply that earned it
_CASSETTES: dict[str, Path] = {}
_REPLY_CHARS = 160


def own_replies(cassette: Path, rollouts: list[str]) -> dict[str, str]:
    """Each rollout's last reply in ``cassette``, its own sample of an ``n > 1`` group (as
    ``show`` and ``diff`` read it), on one line and cut to a glance. A cassette that no longer
    reads gives nothing: the explanation stays as it was."""
    from hermes_replay._diff.compare import _assistant, load_view
    from hermes_replay._errors import CassetteError
    from hermes_replay._terminal.render import sanitize

    try:
        view = load_view(cassette)
    except (CassetteError, OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for rid in rollouts:
        turns = view.transcripts.get(rid) or []
        if not turns:
            continue
        reply = _assistant(turns[-1])
        text = reply.get("content") or reply.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        line = sanitize(" ".join(text.split()))
        out[rid] = line if len(line) <= _REPLY_CHARS else line[:_REPLY_CHARS] + "…"
    return out


_FIRST_RUN = ("no snapshot yet: this is the test's first run. Run `pytest --snapshot-update` "
              "once to write it (a readable table beside the test; commit it); every later run "
              "compares its rewards with it")


def _part(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _delta(old: str, new: str) -> str:
    try:
        return f"{float(new) - float(old):+.4f}"
    except ValueError:
        return ""


def reward_changes(snapshot: str, current: str,
                   replies: dict[str, str] | None = None) -> list[str]:
    """What moved between a stored snapshot and this run: one line per changed rollout
    (``rollout  old → new  Δ``, other changed columns after it, then the reply that earned
    it when ``replies`` has one: the rollout's own, also for one sample of an ``n > 1``
    group), per rollout only one side has, per changed metric; a missing snapshot says how
    to write it."""
    if not snapshot.strip():
        return [_FIRST_RUN]
    old, old_metrics = snapshot_table(snapshot)
    new, new_metrics = snapshot_table(current)
    labelled = snapshot_labels(snapshot, current)
    old_parts, new_parts = snapshot_parts(snapshot), snapshot_parts(current)
    names = ("reward", "turns", "finished", "tool errors")
    rows: list[list[str]] = []
    for rid in sorted(set(old) | set(new)):
        a, b = old.get(rid), new.get(rid)
        if a == b:
            continue
        shown = named(rid, labelled.get(rid))
        if a is None or b is None:  # its reward too: a new rollout's is what is accepted
            side, cols = ("only in this run", b) if a is None else ("only in the snapshot", a)
            rows.append([shown, f"{side}: reward {cols[0] if cols else '-'}", "", "", rid])
            continue
        moved = [f"{n} {x} → {y}" for n, x, y in zip(names[1:], a[1:], b[1:], strict=False)
                 if x != y]
        if rid in old_parts and rid in new_parts:  # the reward's parts: "correct 1 → 0"
            moved += [f"{n} {_part(x)} → {_part(y)}" for n, (x, y) in
                      parts_changes(old_parts[rid], new_parts[rid]).items()]
        also = ", ".join(moved)
        rows.append([shown, f"{a[0]} → {b[0]}", _delta(a[0], b[0]) if a[0] != b[0] else "=",
                     also, rid])
    for key in sorted(set(old_metrics) | set(new_metrics)):
        x, y = old_metrics.get(key, "-"), new_metrics.get(key, "-")
        if x != y:
            rows.append([key, f"{x} → {y}", _delta(x, y), "", key])
    if not rows:
        return ["the snapshot differs only in layout; `pytest --snapshot-update` rewrites it"]
    changed = sum(1 for r in rows if r[4] in old or r[4] in new)  # r[4]: the id or metric
    head = (f"{changed} of {len(set(old) | set(new))} rollout(s) changed (snapshot → this run); "
            "`pytest --snapshot-update` accepts it if intended:")
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    out = [head]
    for r in rows:
        line = f"  {r[0].ljust(width[0])}  {r[1].ljust(width[1])}  {r[2].rjust(width[2])}"
        out.append((line + (f"  ({r[3]})" if r[3] else "")).rstrip())
        if replies and r[4] in replies:
            out.append(f"      its reply: {replies[r[4]]}")
    return out


def failed_reward_snapshots(snapshot: Any) -> list[list[str]]:
    """For each failed assertion of a syrupy ``snapshot`` fixture that compared a rollout
    table: its ``reward_changes`` (what the pytest plugin shows for it)."""
    results = getattr(snapshot, "_execution_results", None)  # syrupy's record of each assert
    out: list[list[str]] = []
    for result in (results or {}).values():
        data = getattr(result, "asserted_data", None)
        if getattr(result, "success", True) or not isinstance(data, str) or \
                not data.startswith(FORMAT_LINE):
            continue
        recalled = getattr(result, "recalled_data", None)
        old = recalled if isinstance(recalled, str) else ""
        cassette = _CASSETTES.get(data)
        replies = {}
        if cassette is not None and old.strip():
            before, after = snapshot_table(old)[0], snapshot_table(data)[0]
            replies = own_replies(cassette, sorted(
                rid for rid in set(before) | set(after) if before.get(rid) != after.get(rid)))
        out.append(reward_changes(old, data, replies))
    return out
