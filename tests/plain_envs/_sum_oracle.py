"""The oracle the sum envs' tests share: the envs' rule written again, and each rollout's own
reply read from its cassette by the sample its record names (never by position), so a test can
recompute every reward a view shows from that rollout's own recorded reply."""

from __future__ import annotations

import re
from pathlib import Path

from hermes_replay import load_cassette

SUM = re.compile(r"What is (\d+) \+ (\d+)\?")


def env_rule(question: str, reply: str) -> float:
    """The sum envs' rule (shuffling_env, arith_chat_env and its subclass process_pool_env),
    written again: 1.0 when the reply boxes the right sum."""
    a, b = map(int, SUM.search(question).groups())  # type: ignore[union-attr]
    return 1.0 if f"\\boxed{{{a + b}}}" in reply else 0.0


def own_rollouts(cassette: Path) -> dict[str, tuple[str, str, dict]]:
    """rollout → (its question, its own reply, its outcome), read from the group's request by
    the sample its record names."""
    loaded = load_cassette(cassette)
    out = {}
    for rid, rec in loaded.rollouts.items():
        group = loaded.rollouts.get(str(rec.outcome.get("traffic") or ""))
        if group is None:
            continue
        (inter,) = group.interactions
        [[seq, k]] = rec.outcome.get("samples") or [[inter.seq, rec.outcome["choice"]]]
        assert seq == inter.seq
        question = inter.request["body"]["messages"][-1]["content"]
        (choice,) = [c for c in inter.response["body"]["choices"] if c["index"] == k]
        out[rid] = (question, choice["message"]["content"], rec.outcome)
    return out
