"""The first differing tool call of a rollout, between two cassettes (used by ``_diff.compare``).

Calls are compared in ``seq`` order: the request (source, name, arguments) first — a reward
that now runs another command shows as ``tool call 2 (terminal).arguments.command`` — then
the answer (result, exit code, or the exception raised). Durations are never compared.
"""

from __future__ import annotations

from hermes_replay._cassette.toolcalls import ToolCall, tool_call_diff

__all__ = ["first_tool_divergence"]


def _first_key(a: dict, b: dict) -> str:
    differing = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    return differing[0] if differing else ""


def _turn(call: ToolCall) -> int | None:
    """The 1-based LLM turn an agent call answers; None for a call the reward (or evaluate)
    made: it follows the last turn and answers none (a one-turn rollout's reward call was
    labelled "after turn 2")."""
    return call.turn + 1 if call.source == "agent" else None


def first_tool_divergence(rollout: str, a: list[ToolCall],
                          b: list[ToolCall]) -> tuple[int | None, str, str] | None:
    """``(turn, field, diff)`` of the first differing call of ``rollout``, or None; ``turn`` is
    the 1-based LLM turn the call answers, as every message counts turns, or None for a call
    made by the reward."""
    for ca, cb in zip(a, b, strict=False):
        where = f"tool call {ca.seq} ({ca.name})"
        if ca.request() != cb.request():
            key = _first_key(ca.request(), cb.request())
            if key == "arguments" and isinstance(ca.arguments, dict) and isinstance(
                    cb.arguments, dict):
                key += "." + _first_key(ca.arguments, cb.arguments)
            return _turn(ca), f"{where}.{key}", tool_call_diff(ca.request(), cb.request(),
                                                               "A", "B")
        if ca.answer() != cb.answer():
            key = _first_key(ca.answer(), cb.answer())
            return _turn(ca), f"{where}.{key}", tool_call_diff(ca.answer(), cb.answer(), "A", "B")
    if len(a) != len(b):
        longer, side = (a, "A") if len(a) > len(b) else (b, "B")
        extra = longer[min(len(a), len(b))]
        return _turn(extra), (f"tool call count ({len(a)} in A, {len(b)} in B; tool call "
                              f"{extra.seq} ({extra.name}) only in {side})"), ""
    return None
