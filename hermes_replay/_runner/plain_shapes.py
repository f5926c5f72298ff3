"""What a plain env's ``collect_trajectories`` returned, checked against atroposlib 0.4.0.

atroposlib 0.4.0 takes ``(groups, backlog)``: ``groups`` a ``ScoredDataGroup`` (a dict of
per-rollout lists: tokens, masks, scores …), a list of them (or of None), or None to drop the
item; ``backlog`` a list of items to run later. Envs written for an older atroposlib return
other shapes — unscored ``(messages, score)`` tuples, one rollout's ``ScoredDataItem``, a bare
group without the backlog — and atroposlib then fails far from the cause, in
``handle_send_to_api`` (``'tuple' object has no attribute 'get'``), or silently skips every
group as "Group structure invalid". The harness names what came back and what is expected, at
the call that returned it.
"""

from __future__ import annotations

from typing import Any

from hermes_replay._errors import HermesReplayError

__all__ = ["EnvAtOddsWithAtropos", "at_odds", "describe", "shape_problem"]

EXPECTED = ("atroposlib 0.4.0 expects a pair (groups, backlog): groups a ScoredDataGroup (a "
            "dict of per-rollout lists — tokens, masks, scores), a list of ScoredDataGroups, "
            "or None to drop the item; backlog a list of items to run later (usually [])")


class EnvAtOddsWithAtropos(HermesReplayError):
    """A plain env returned something atroposlib 0.4.0 cannot take (see ``plain_shapes``)."""


def describe(value: Any, depth: int = 0) -> str:
    """A short description of a value's shape: ``(list of 4 tuples, list)``."""
    if value is None:
        return "None"
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:5])
        return f"a dict ({keys}{' …' if len(value) > 5 else ''})" if depth else \
            f"a dict with keys {keys}{' …' if len(value) > 5 else ''}"
    if isinstance(value, tuple) and depth == 0:
        return "(" + ", ".join(describe(v, 1) for v in value[:4]) + \
            (", …" if len(value) > 4 else "") + ")"
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in value})
        inner = "/".join(kinds) if kinds else "nothing"
        return f"a {type(value).__name__} of {len(value)} {inner}"
    return type(value).__name__


def _group_problem(group: Any) -> str | None:
    if group is None:
        return None
    if not isinstance(group, dict):
        return f"a group is {describe(group, 1)}, not a ScoredDataGroup"
    scores = group.get("scores")
    if scores is not None and not isinstance(scores, (list, tuple)):
        return ("a group's 'scores' is one number: that is one rollout's ScoredDataItem "
                "(what collect_trajectory returns), not a group")
    return None


def shape_problem(result: Any, custom_postprocess: bool) -> str | None:
    """Why ``result`` is not what atroposlib 0.4.0 takes from ``collect_trajectories``, or
    None. With ``custom_postprocess`` (the env overrides ``postprocess_histories``, which may
    turn anything into groups) only the pair itself is checked."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return "it is not a pair (groups, backlog)"
    groups, backlog = result
    if not isinstance(backlog, (list, tuple)):
        return f"the backlog (second element) is {describe(backlog, 1)}, not a list"
    if custom_postprocess or groups is None:
        return None
    if isinstance(groups, dict):
        return _group_problem(groups)
    if isinstance(groups, list):
        for group in groups:
            problem = _group_problem(group)
            if problem is not None:
                return problem
        return None
    return f"the groups (first element) are {describe(groups, 1)}"


def at_odds(env_name: str, result: Any, problem: str) -> EnvAtOddsWithAtropos:
    return EnvAtOddsWithAtropos(
        f"{env_name}.collect_trajectories returned {describe(result)}: {problem}. "
        f"{EXPECTED}. An env written for an older atroposlib (scored tuples, or scoring left "
        "to the caller) fails later inside atroposlib with an unrelated error ('tuple' object "
        "has no attribute 'get').\n"
        "  next step: score the rollouts in the env (score() or collect_trajectories) into a "
        "ScoredDataGroup(tokens=[...], masks=[...], scores=[...]) and return (group, []); "
        "docs/plain-envs.md shows one")
