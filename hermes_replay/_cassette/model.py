"""The cassette's shapes: header, interaction, rollout record, loaded cassette.

Reading (``_cassette.read``) and writing (``_cassette.write``) share these; ``_cassette``
re-exports all three as the one place the rest of the package imports from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_replay._cassette.toolcalls import ToolCall

__all__ = ["ROLLOUT_ID_RULE", "SCHEMA_VERSION", "Cassette", "CassetteHeader", "Interaction",
           "RolloutRecord", "harness_version", "partial_path", "reward_calls", "rollout_id_problem",
           "stages_marked"]

SCHEMA_VERSION = 2  # 2 added tool records; schema 1 files (no tool calls) still load

# One rule for rollout ids, checked where they are made (``_session.scope.rollout``) and where a
# cassette is checked (``verify``), so recording can never write an id that ``verify`` then
# rejects. Ids name folders and are printed by ls/show/miss reports: no path parts, no control
# characters. It is a rule of the format, so it lives with the cassette's shapes.
ROLLOUT_ID_RULE = ("a rollout id is 1-256 characters with no path separators ('/', '\\'), "
                   "no '..' and no control characters (e.g. 'train-3fa2c1d09b7e-0-2')")
_ROLLOUT_BAD = re.compile(r"[\x00-\x1f\x7f/\\]|\.\.")


def rollout_id_problem(rollout_id: object) -> str | None:
    """Why ``rollout_id`` breaks ``ROLLOUT_ID_RULE``, or None when it is a good id."""
    if not isinstance(rollout_id, str):
        return f"rollout id must be a string, not {type(rollout_id).__name__}"
    if not rollout_id:
        return "rollout id is empty"
    if len(rollout_id) > 256:
        return f"rollout id is {len(rollout_id)} characters long"
    bad = _ROLLOUT_BAD.search(rollout_id)
    if bad is not None:
        return f"rollout id {rollout_id[:60]!r} contains {bad.group()!r}"
    return None


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def harness_version() -> str:
    from hermes_replay import __version__

    return __version__


class CassetteHeader(BaseModel):
    """What was recorded, with what, and how (line 1 of every cassette)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    harness_version: str = Field(default_factory=harness_version)
    created: str = Field(default_factory=_now)
    env_name: str | None = None
    env_file: str | None = None
    command: list[str] = Field(default_factory=list)
    endpoint_type: str | None = None
    base_url: str | None = None
    model: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    tokenizer: dict[str, Any] | None = None
    #: what ``random`` and numpy were seeded with before the environment started
    seed: int | None = None
    #: kept with the cassette, applied by every replay of it (``_normalizers``): built-in
    #: names, or ``[regex, replacement]`` pairs
    normalizers: list[Any] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    def merged(self, fields: dict[str, Any]) -> CassetteHeader:
        """A copy with ``fields`` applied: known names set, everything else into ``extra``."""
        data = self.model_dump()
        known = set(type(self).model_fields) - {"type", "schema_version"}
        for key, value in fields.items():
            if key in known and key != "extra":
                data[key] = value
            elif key == "extra" and isinstance(value, dict):
                data["extra"] = {**data["extra"], **value}
            else:
                data["extra"][key] = value
        return CassetteHeader.model_validate(data)


class Interaction(BaseModel):
    """One LLM request and its response, both complete (decoded) and redacted."""

    rollout: str | None = None
    seq: int = 0
    kind: str = "other"
    request: dict[str, Any]
    response: dict[str, Any]
    fingerprint: str = ""
    duration_ms: float = 0.0
    #: "reward" for a request made while the rollout's reward was computed (``scoring()``);
    #: None: the agent's (files written before stages were recorded: see ``reward_calls``)
    stage: str | None = None

    @property
    def key(self) -> tuple[str | None, int]:
        return (self.rollout, self.seq)

    @property
    def url(self) -> str:
        """The request's URL (a deferred interaction knows it without decoding its body)."""
        return str(self.request.get("url", ""))


@dataclass
class RolloutRecord:
    id: str
    interactions: list[Interaction] = field(default_factory=list)
    outcome: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Cassette:
    """A loaded cassette. ``complete`` is False for a ``.partial`` (interrupted) recording."""

    path: Path
    header: CassetteHeader
    interactions: list[Interaction]
    rollouts: dict[str, RolloutRecord]
    complete: bool = True
    tool_calls: list[ToolCall] = field(default_factory=list)
    # (rollout, seq) -> the line of the file each interaction was read from (error messages)
    lines: dict[tuple[str | None, int], int] = field(default_factory=dict)

    @property
    def scopeless(self) -> list[Interaction]:
        return [i for i in self.interactions if i.rollout is None]

    @property
    def outcomes(self) -> dict[str, dict[str, Any]]:
        return {rid: r.outcome for rid, r in self.rollouts.items() if r.outcome}


def reward_calls(interactions: list[Interaction], outcome: dict[str, Any] | None,
                 marked: bool) -> dict[int, int]:
    """One rollout's reward calls: ``{seq: K}`` (K from 1, in seq order) — what ``show``
    labels ``reward call K`` and replay matches reward requests against.

    ``marked``: the cassette records stages; its reward calls are the ``stage: "reward"``
    ones. Older cassettes did not, so there the requests after the agent's last turn
    (``seq >= turns_used``, which a Hermes rollout reports) are its reward calls."""
    if marked:
        seqs = sorted(i.seq for i in interactions if i.stage == "reward")
    else:
        turns = (outcome or {}).get("turns_used")
        if not isinstance(turns, int) or isinstance(turns, bool) or turns < 0:
            return {}
        seqs = sorted(i.seq for i in interactions if i.seq >= turns)
    return {seq: k for k, seq in enumerate(seqs, start=1)}


#: header ``extra`` key a recorder that marks reward calls writes: its cassette's unmarked
#: requests are all the agent's, even when the rollout made no reward call at all
STAGES_KEY = "stages"


def stages_marked(interactions: list[Interaction],
                  header: CassetteHeader | None = None) -> bool:
    """Whether a cassette records stages: its header says its recorder marks them, or a
    reward call is marked as one. Only older cassettes fall back to ``turns_used``: there a
    rollout that reported ``turns_used=0`` would have its agent turns taken for reward calls."""
    if header is not None and header.extra.get(STAGES_KEY) is True:
        return True
    return any(i.stage is not None for i in interactions)


def partial_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".partial")


# ----------------------------------------------------------------------------- reading
