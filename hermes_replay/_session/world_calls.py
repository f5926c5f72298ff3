"""The tool ledger's calls that depend on the world a rollout built (``ToolLedger`` mixin).

Reward-side calls (``source="reward"``: ``ToolContext`` in ``compute_reward``/``evaluate``)
read the sandbox the agent's tool calls built, so a recorded answer is true only in that
world (``_world.causality``):

- ``replay``: served from the cassette while the rollout's agent side replayed exactly; a
  reward call with no recording over an intact agent side is *re-scored* — run in a fresh
  sandbox holding the rollout's recorded workspace (``_world.rescore``); over an agent side
  that differed it is refused, naming the first agent action that differed.
- ``auto`` (and ``record --missing-only``): the same for an intact agent side, and the
  re-scored calls are written. A rollout whose agent side differs (a model turn answered
  live, an agent tool call with no recording) is *rebuilt*: the agent tool calls already
  answered from the cassette run again, in order, in a fresh sandbox (so the world exists),
  and every later call of the rollout, reward calls included, runs and is recorded — recorded
  agent results and live reward calls are never mixed.
- ``record``: the rollout's workspace is captured before its first reward call runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_replay._cassette.toolcalls import ToolCall, exit_code_of, tool_call_diff
from hermes_replay._errors import Miss
from hermes_replay._session.tool_errors import ToolCallMiss, ToolDrift
from hermes_replay._world.causality import AgentAction, first_difference, unbuilt_world
from hermes_replay._world.manifest import WorkspaceError
from hermes_replay._world.rescore import SandboxWorld, Worlds

__all__ = ["Rebuild", "WorldCalls"]


@dataclass
class Rebuild:
    """``auto``: one rollout whose agent side differed, re-run for real from its first call."""

    reason: str
    done: bool = False
    rerun: int = 0


class WorldCalls:
    """Mixed into ``ToolLedger``: world-aware calls (see the module docstring)."""

    worlds: Worlds
    agent_made: dict[str, list[AgentAction]]
    agent_divergence: Callable[[str], str | None] | None
    rebuilds: dict[str, Rebuild]
    fork: Any  # the session's ``ForkPoint`` (``_session.forking``), or None

    # -- agent side --------------------------------------------------------------------

    def note_agent(self, rollout: str, turn: int, name: str, arguments: Any,
                   canon: str) -> None:
        self.agent_made.setdefault(rollout, []).append((turn, name, arguments, canon))

    def divergence(self, rollout: str) -> str | None:
        """The first agent action of ``rollout`` that differs from the recording, if any."""
        if self.agent_divergence is not None:
            llm = self.agent_divergence(rollout)
            if llm is not None:
                return llm
        recorded = [r.call for r in self.by_rollout.get(rollout, []) if r.call.source == "agent"]
        if any(d.rollout == rollout and d.name and d.seq >= 0 for d in self.drift):
            return "an agent tool call's result drifted from its recording"
        return first_difference(recorded, self.agent_made.get(rollout, []), self._canon)

    def auto_agent(self, rollout: str, seq: int, turn: int, request: dict[str, Any],
                   rec: Any, run: Callable[[], Any]) -> tuple[bool, Any]:
        """``auto``, an agent call: (True, answer) to serve it from the cassette, or
        (False, None) to execute it — after rebuilding the rollout's world if it differed."""
        rebuild = self.rebuilds.get(rollout)
        if rebuild is None:
            reason = self.agent_divergence(rollout) if self.agent_divergence else None
            if reason is None and rec is None:
                reason = f"turn {turn + 1}: {request['name']} has no recording"
            if reason is None:
                assert rec is not None
                rec.used = True
                served = self._fork_served(rollout, rec.call)
                self.hits.append((seq, served))
                self._pending.setdefault(rollout, []).append((run, rec.call))
                return True, served
            self.rebuild(rollout, reason)
        return False, None

    def rebuild(self, rollout: str, reason: str) -> Rebuild:
        """Re-run, in order, the agent calls of ``rollout`` answered from the cassette so far,
        so its sandbox holds what they did; from now on every call of it executes."""
        rebuild = self.rebuilds.setdefault(rollout, Rebuild(reason))
        if rebuild.done:
            return rebuild
        rebuild.done = True
        for run, call in self._pending.pop(rollout, []):
            self._rerun(rollout, run, call)
            rebuild.rerun += 1
        return rebuild

    def fork_rebuild(self, rollout: str, reason: str, *, stop_at_drift: bool
                     ) -> ToolDrift | None:
        """A fork reaches its live turn: re-run the recorded agent calls of ``rollout`` served
        so far, in order, in its fresh sandbox; the first drift (``stop_at_drift``: the
        re-run stops there), or None."""
        with self.lock:
            rebuild = self.rebuilds.setdefault(rollout, Rebuild(reason))
            if rebuild.done:
                return None
            rebuild.done = True
            first = None
            for run, call in self._pending.pop(rollout, []):
                before = len(self.drift)
                self._rerun(rollout, run, call)
                rebuild.rerun += 1
                if len(self.drift) > before and first is None:
                    first = self.drift[-1]
                    if stop_at_drift:
                        break
            return first

    def _fork_served(self, rollout: str, call: ToolCall) -> ToolCall:
        """What a fork's env is given for a recorded call: the recording, or — for the call
        whose result the model sees replaced (``--replace-message``) — that text."""
        fork = self.fork
        if fork is None or rollout != fork.rollout or call.seq != fork.replace_seq:
            return call
        return call.model_copy(update={"result": fork.replace_text, "raised": None,
                                       "exit_code": exit_code_of(fork.replace_text),
                                       "origin": "replaced"})

    def _rerun(self, rollout: str, run: Callable[[], Any], call: ToolCall) -> None:
        """Run again a call that was answered from the cassette; the new result is what the
        rollout's file keeps, and a difference from what was served is drift. A fork keeps
        what was served (what its env was given, so the branch replays) and lists the drift."""
        keep = self.fork is not None and rollout == self.fork.rollout
        if not keep:
            self.hits = [(s, c) for s, c in self.hits if c is not call]
        _, again = self._execute(run, call.request(), rollout, call.seq, call.turn)
        again = again.model_copy(update={"origin": "rescored" if call.source == "reward"
                                         else "rerun"})
        self.executed += 1
        if self.normalize(again.answer()) != self.normalize(call.answer()):
            self.drift.append(ToolDrift(rollout, call.seq, call.name,
                                        "run again in the restored world, its result differs "
                                        "from the recorded one the code was given",
                                        tool_call_diff(call.answer(), again.answer(),
                                                       "recorded", "run again")))
        if self.mode == "auto" and not keep:
            self.new.append(again)
            if self.writer is not None:
                self.writer.tool_call(again)

    # -- reward side -------------------------------------------------------------------

    def reward_call(self, name: str, request: dict[str, Any], canon: str,
                    run: Callable[[], Any], rollout: str, turn: int,
                    world: SandboxWorld | None) -> tuple[bool, Any, int]:
        """A reward-side call in replay/auto: (served, answer-or-call, seq). ``served`` True:
        the recorded call; False: the caller executes ``run`` (re-score or rebuilt world)."""
        side = self.worlds.side(rollout)
        with side.lock:
            with self.lock:
                seq = self.issued.get(rollout, 0)
                self.issued[rollout] = seq + 1
                if not side.checked:
                    side.checked = True
                    side.divergence = self.divergence(rollout)
            if side.divergence is not None:
                if self.mode == "auto":  # rebuild the world and record the reward for real
                    self.rebuild(rollout, side.divergence)
                    if not side.captured:
                        self.worlds.capture(rollout, world)
                    return False, None, seq
                raise self._refuse(rollout, seq, turn, request,
                                   unbuilt_world(rollout, side.divergence, name))
            if not side.rescoring:
                with self.lock:
                    rec = self._find(rollout, seq, canon)
                    if rec is not None:
                        rec.used = True
                        self.hits.append((seq, rec.call))
                        side.served.append((run, rec.call))
                        return True, rec.call, seq
                try:
                    side.restored = self.worlds.restore(rollout, world)
                except (WorkspaceError, OSError) as exc:
                    raise self._refuse(rollout, seq, turn, request,
                                       f"its reward's tool calls changed and {exc}") from None
                side.rescoring = True
                for prev_run, prev in side.served:
                    self._rerun(rollout, prev_run, prev)
                    side.executed += 1
            side.executed += 1
            return False, None, seq

    def _refuse(self, rollout: str, seq: int, turn: int, request: dict[str, Any],
                reason: str) -> BaseException:
        miss = Miss(str(self.path), rollout, turn, "TOOL",
                    f"{request['name']} (tool call {seq}, reward); nothing was executed",
                    reason, None, "")
        with self.lock:
            self.misses.append(miss)
        if self.on_miss is not None:
            self.on_miss(miss)
        return ToolCallMiss(miss)

    def unmade_agent_calls(self, ran: set[str], missed: set[str | None]) -> list[Miss]:
        """Replay: recorded agent calls of rollouts that ran but never made them (a rollout
        that already missed is reported by that miss)."""
        out = []
        for rollout in sorted(r for r in ran if r not in missed):
            unused = [r.call for r in self.by_rollout.get(rollout, [])
                      if not r.used and r.call.source == "agent"]
            if unused:
                first = min(unused, key=lambda c: c.seq)
                out.append(Miss(
                    str(self.path), rollout, first.turn, "TOOL",
                    f"{first.name} (tool call {first.seq}, agent) was recorded but never made",
                    f"{len(unused)} recorded agent tool call(s) of this rollout were not made "
                    "in this run (a changed parser, prompt or turn limit ended the agent "
                    "earlier): its agent side did not replay. Next step: re-record the "
                    "cassette if the change is intended"))
        return out
