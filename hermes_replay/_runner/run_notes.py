"""What a run says about itself beyond its counts: groups atroposlib skips, rewards a cassette
had given by position, requests the endpoint refused.

Each is a line of ``RunResult.handled`` (printed under the run's summary) or part of a failed
recording's error, kept here so ``run.py`` stays the run's sequence.
"""

from __future__ import annotations

from typing import Any

from hermes_replay._errors import HermesReplayError

__all__ = ["by_position", "name_refusals", "skipped_groups"]


def skipped_groups(plain: Any) -> list[str]:
    """The groups a plain env returned empty or atroposlib skips, counted and named (their
    rollouts carry no reward, so the run's mean leaves them out)."""
    skipped = [s for i in getattr(plain, "identities", []) for s in i.skipped_groups]
    if not skipped:
        return []
    more = f"; … and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return [f"{len(skipped)} group(s) dropped, not trained on and left out of the mean "
            "reward: " + "; ".join(skipped[:3]) + more]


def by_position(summary: Any) -> list[str]:
    """Changed rewards that the cassette had given by position (recorded before rewards were
    matched to replies by content): the replay's are each reply's own, said so."""
    moved = [o.rollout for o in summary.outcomes if o.reward_changed and o.recorded
             and o.recorded.get("traffic") and "attribution" not in o.recorded]
    if not moved:
        return []
    shown = ", ".join(moved[:4]) + (f" and {len(moved) - 4} more" if len(moved) > 4 else "")
    return [f"{len(moved)} changed reward(s) were recorded by position, before hermes-replay "
            f"matched each score to its reply by content ({shown}): this replay gives each "
            "rollout its own reply's reward; re-record to store those"]


def name_refusals(error: HermesReplayError, session: Any) -> None:
    """A failed recording whose endpoint refused requests (HTTP 4xx, which the env may have
    swallowed) says so first: status, count, the endpoint's reason."""
    lines = session.refusals.lines() if hasattr(session, "refusals") else []
    if lines:
        error.args = ("\n  ".join([*lines, str(error)])
                      + "\n  next step: make the request acceptable to the endpoint (its "
                      "reason above), or the endpoint accept it (a scripted endpoint: a rule "
                      "for it)",)
