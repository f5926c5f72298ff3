"""A session in *fork* mode: one rollout replayed up to turn K, then continued live.

``hermes_replay.cassette(branch, "auto", fork={"rollout": R, "turn": K, ...})`` on a copy of
the parent cassette (``_fork`` makes it) runs the recorded command with these rules:

- rollout ``R``'s requests before turn ``K`` are answered from the recording (fingerprint-
  checked); its agent tool calls before ``K`` are answered from the recording too, so the env
  is given exactly what the parent's was;
- at ``R``'s first request of turn ``K`` the sandbox is rebuilt: those tool calls run again,
  in order, in a fresh bubblewrap sandbox, and each result is compared with its recording
  (drift, per call; ``strict`` stops at the first). The branch keeps the recorded results,
  which are what the env was given (so it replays offline), and lists the drift;
- from turn ``K`` on, every request of ``R`` (its reward's judge calls included) goes live and
  every tool call executes, as a recording does;
- every other rollout replays exactly (a miss fails the fork: it never goes live).

Where a fork cannot honestly go on — a prefix request that no longer matches its recording,
drift under ``strict``, a rollout that ended before turn ``K`` — ``failure`` is set, the
request fails as a miss does, and the session's close raises it (nothing is written).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._errors import ForkError, Miss, RequestNotRecorded

__all__ = ["ForkPoint", "Forking"]


@dataclass
class ForkPoint:
    """Where a session forks, and what it found on the way (shared under the session lock)."""

    rollout: str
    turn: int  # 1-based: the first turn answered live
    strict: bool = False
    #: the recorded agent tool call (its seq) whose result the model sees replaced, and by what
    replace_seq: int | None = None
    replace_text: str | None = None
    started: bool = False
    failure: ForkError | None = None

    @classmethod
    def build(cls, value: ForkPoint | Mapping[str, Any] | None) -> ForkPoint | None:
        if value is None or isinstance(value, ForkPoint):
            return value
        if not isinstance(value, Mapping) or not isinstance(value.get("rollout"), str) \
                or not isinstance(value.get("turn"), int) or value["turn"] < 1:
            raise ValueError(f"fork= takes {{'rollout': ID, 'turn': K ≥ 1, ...}}, not {value!r}")
        return cls(value["rollout"], value["turn"], bool(value.get("strict", False)),
                   value.get("replace_seq"), value.get("replace_text"))

    def live(self, rollout: str | None, stage: str, cursor: int) -> bool:
        """Whether this request of ``rollout`` goes to the endpoint (its ``cursor``-th turn)."""
        return rollout == self.rollout and (stage == "reward" or cursor >= self.turn - 1)


class Forking:
    """Mixed into ``Session``: the fork's two moments (the live turn begins; a miss)."""

    path: Path
    fork: ForkPoint | None
    tools: Any
    _lock: threading.RLock

    def _fork_begins(self, rollout: str) -> None:
        """``rollout``'s first live request: rebuild its world from the recorded prefix."""
        fork = self.fork
        assert fork is not None
        with self._lock:
            if fork.started:
                return
            fork.started = True
        where = f"forked at turn {fork.turn}"
        drifted = self.tools.fork_rebuild(rollout, where, stop_at_drift=fork.strict)
        if drifted is not None and fork.strict:
            fork.failure = ForkError(
                f"the recorded {drifted.name} call (tool call {drifted.seq}) gave another "
                f"result when run again to rebuild the sandbox, so the world at turn "
                f"{fork.turn} is not the recorded one:\n{drifted.diff}",
                cassette=self.path, rollout=rollout, turn=fork.turn,
                hint="without --strict the fork goes on and lists the drift; or make the "
                "command deterministic (a fixed clock or seed) and re-record the parent")
            raise RequestNotRecorded(Miss(str(self.path), rollout, fork.turn - 1, "TOOL",
                                          drifted.name, "drift under --strict"))

    def _fork_miss(self, rollout: str | None, miss: Miss) -> None:
        """A request of the fork with no recording: the prefix (or another rollout) cannot
        be replayed, so the fork cannot resume where the recording was."""
        fork = self.fork
        if fork is None or fork.failure is not None:
            return
        if rollout == fork.rollout:
            what = (f"its request at turn {miss.turn + 1} no longer matches the recording, so "
                    f"the env cannot resume at turn {fork.turn} (the prefix must replay exactly)")
        else:
            what = (f"rollout {rollout or '<none>'} of the same run no longer replays (turn "
                    f"{miss.turn + 1}); a fork replays every other rollout exactly")
        fork.failure = ForkError(
            f"{what}:\n{miss.describe()}", cassette=self.path, rollout=fork.rollout,
            turn=fork.turn,
            hint="the env file changed since the recording: fork the recording it made "
            "(re-record the parent with `hermes-replay record`, then fork that)")

    def _fork_unreached(self) -> ForkError | None:
        """The run ended and the forked rollout never reached turn K: nothing was forked."""
        fork = self.fork
        assert fork is not None
        if fork.started:
            return None
        return ForkError(
            f"the run ended before the rollout asked for turn {fork.turn}: the env did not "
            "resume it that far (its item was not drawn again, or its loop stopped earlier "
            "than in the recording)", cassette=self.path, rollout=fork.rollout, turn=fork.turn,
            hint="check that the env file and its flags are the recorded ones (the fork re-runs "
            "the recorded command); an env whose rollouts are not resumable turn by turn "
            "cannot be forked — re-record it instead")
