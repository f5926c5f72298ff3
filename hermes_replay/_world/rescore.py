"""Each rollout's reward side in a session: capture its world, or restore it to re-score.

One ``RewardSide`` per rollout, made at its first reward-side tool call:

- recording (``record``/``auto``): the sandbox's working tree is captured before that first
  call runs (``_world.capture``), once, while concurrent reward calls of the rollout wait;
- replaying: the first reward call checks causality (``_world.causality``) once. While the
  agent side is intact, recorded reward calls are answered from the cassette and remembered
  with their ``run``; the first one that has no recording starts a re-score: a fresh sandbox
  is filled with the recorded workspace, the reward calls already answered are run again in
  it in order (so their side effects exist; a result that now differs is drift), and from
  then on every reward call of the rollout runs there.

A ``SandboxWorld`` is what the environment layer hands ``tool_call`` for this: where the
sandbox's working tree is on the host, and how to give restored files to the sandbox's user.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hermes_replay._cassette.toolcalls import ToolCall
from hermes_replay._world.capture import DEFAULT_LIMIT, capture_workspace
from hermes_replay._world.manifest import Workspace, WorkspaceError
from hermes_replay._world.restore import restore_workspace
from hermes_replay._world.store import BlobStore, store_for
from hermes_replay._world.trees import expand, store_tree

__all__ = ["WORKSPACE_LIMIT_VAR", "RewardSide", "SandboxWorld", "Worlds", "default_limit",
           "load_workspace"]

#: bytes of workspace kept per rollout when a session is not given a limit
WORKSPACE_LIMIT_VAR = "HERMES_REPLAY_WORKSPACE_LIMIT"


def default_limit() -> int:
    text = os.environ.get(WORKSPACE_LIMIT_VAR, "").strip()
    return int(text) if text.isdigit() else DEFAULT_LIMIT


class SandboxWorld(Protocol):
    """The environment's handle on one rollout's sandbox (``ToolContext`` makes one)."""

    def root(self, create: bool) -> str | None:
        """The host path of the working tree; None when there is no sandbox and ``create``
        is False (the agent never used a tool: its world is empty)."""

    def settle(self) -> None:
        """Restored files were written under ``root``: make them the sandbox user's."""


@dataclass
class RewardSide:
    """One rollout's reward-side state."""

    # re-entrant: a rebuilt rollout's reward call captures its world while holding it
    lock: threading.RLock = field(default_factory=threading.RLock)
    captured: bool = False
    checked: bool = False
    divergence: str | None = None  # the first agent action that differed (replay)
    served: list[tuple[Callable[[], Any], ToolCall]] = field(default_factory=list)
    rescoring: bool = False
    executed: int = 0  # reward calls run in the restored world (re-runs included)
    restored: int = 0  # files put back


def load_workspace(record: Any, store: BlobStore) -> Workspace:
    """A recorded workspace (a v2 tree in ``store``, or an inline v1 manifest), checked."""
    if isinstance(record, dict) and record.get("v") == 2:
        record = expand(record, store)
    return Workspace.parse(record)


class Worlds:
    """The workspaces of one session: captured ones (to write) and recorded ones (to restore)."""

    def __init__(self, cassette: str | Path, limit: int | None = None) -> None:
        self.cassette = Path(cassette)
        self.limit = default_limit() if limit is None else limit
        self.recorded: dict[str, Any] = {}  # rollout → its manifest as the cassette has it
        self.captured: dict[str, dict[str, Any]] = {}
        self.sides: dict[str, RewardSide] = {}
        self._lock = threading.Lock()

    def side(self, rollout: str) -> RewardSide:
        with self._lock:
            return self.sides.setdefault(rollout, RewardSide())

    def capture(self, rollout: str, world: SandboxWorld | None) -> None:
        """Record the rollout's working tree once, before its first reward call runs."""
        if self.limit <= 0:
            return
        side = self.side(rollout)
        with side.lock:
            if side.captured:
                return
            side.captured = True
            root = world.root(False) if world is not None else None
            store = store_for(self.cassette)
            ws = (capture_workspace(root, store, self.limit)
                  if root is not None else Workspace(limit=self.limit))
            with self._lock:
                self.captured[rollout] = store_tree(ws, store)

    def restore(self, rollout: str, world: SandboxWorld | None) -> int:
        """Fill a fresh sandbox with the rollout's recorded workspace; files written.

        ``WorkspaceError`` when there is none to restore or it cannot be used."""
        manifest = self.recorded.get(rollout)
        if manifest is None:
            raise WorkspaceError(
                f"the cassette keeps no workspace for rollout {rollout!r} (recorded before "
                "hermes-replay recorded workspaces, or with --workspace-limit 0), so its "
                "changed reward cannot be re-scored offline. Next step: re-record it "
                "(`hermes-replay record … --missing-only`) to add one")
        if world is None:
            raise WorkspaceError("this reward call gave no sandbox to restore the workspace into")
        store = store_for(self.cassette)
        ws = load_workspace(manifest, store)
        root = world.root(True)
        if root is None:
            raise WorkspaceError("the sandbox could not be created")
        written = restore_workspace(ws, store, root)
        world.settle()
        return written

    def rescored(self) -> dict[str, tuple[int, int]]:
        """Rollouts re-scored from their recorded workspace → (files restored, calls run)."""
        with self._lock:
            return {r: (s.restored, s.executed) for r, s in self.sides.items() if s.rescoring}
