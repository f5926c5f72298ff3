"""The built-in probes that need no sandbox: degenerate replies, broken tool use, known-good.

Each is a list of scripted-endpoint rules (see ``_registry``). They are deterministic (no use of
the sample's ``rng``), so the same probe gives the same replies on every run and a second run
that scores differently is the environment's nondeterminism, not the policy's.
"""

from __future__ import annotations

import random
from typing import Any

from hermes_replay.probe._registry import ProbeContext, register_probe
from hermes_replay.scripted_endpoint import Conversation, Reply, Rule

HUGE_REPLY_BYTES = 1_000_000
CLAIM = "Done. All tests pass. The task is complete and the answer is verified."

# Broken tool calls in every format the parsers read: truncated JSON, a name without
# arguments, arguments that are not an object, missing end markers. Whichever parser the
# environment uses meets its own format's broken shapes here (and the others as noise).
BROKEN_SHAPES = (
    '<tool_call>{"name": "terminal", "arguments": {"command": "echo hi"</tool_call>',
    "<tool_call>not json at all</tool_call>",
    '<longcat_tool_call>{"name": </longcat_tool_call>',
    '[TOOL_CALLS][{"name": "terminal", "arguments": {]',
    "[TOOL_CALLS]terminal{not json",
    '<|python_tag|>{"name": "terminal", "parameters": }',
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>terminal\n```json\n"
    '{"command": \n```',
    "<｜tool▁call▁begin｜>terminal<｜tool▁sep｜>{bad<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.terminal:0"
    '<|tool_call_argument_begin|>{"command": <|tool_call_end|>',
    "<tool_call>terminal\n<arg_key>command</arg_key></tool_call>",
    "<tool_call><function=><parameter=command>echo</function>",
)
BROKEN_TEXT = "\n".join(BROKEN_SHAPES)


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    names = []
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and fn.get("name"):
            names.append(str(fn["name"]))
    return names


def _needs_tools(tools: list[dict[str, Any]]) -> str | None:
    return None if tool_names(tools) else "the environment offers no tools"


def _always(conv: Conversation) -> bool:
    return True


def _say(text: str) -> Rule:
    return Rule("say", _always, lambda c, rng: Reply(content=text))


@register_probe("empty", description="an empty reply")
def empty(ctx: ProbeContext) -> list[Rule]:
    return [_say("")]


@register_probe("refusal", description="a refusal")
def refusal(ctx: ProbeContext) -> list[Rule]:
    return [_say("I'm sorry, but I can't help with that request.")]


@register_probe("restate", description="restates the prompt as its answer")
def restate(ctx: ProbeContext) -> list[Rule]:
    return [Rule("restate", _always, lambda c, rng: Reply(content=c.first_user_text))]


@register_probe("claim-success", description='"Done. All tests pass." with no tool use')
def claim_success(ctx: ProbeContext) -> list[Rule]:
    return [_say(CLAIM)]


def _broken_calls(conv: Conversation, rng: random.Random) -> Reply:
    names = tool_names(conv.tools) or ["terminal"]
    turn = conv.assistant_turn
    name = names[turn % len(names)]
    structured: list[list[tuple[str, dict[str, Any] | str]]] = [
        [(name, '{"command": "echo hi"'), (name, '["not", "an", "object"]')],
        [("", "{}"), (name, "{'command': 'echo hi'}")],
        [(name, "null"), (name, '{"command": ')],
    ]
    if turn < len(structured):
        return Reply(content=BROKEN_TEXT, tool_calls=list(structured[turn]))
    return Reply(content=BROKEN_TEXT)  # last turn: only text, for the env's parser to read


@register_probe("malformed-calls", description="only malformed tool calls, in every parser's "
                "broken shapes (structured and in text)")
def malformed_calls(ctx: ProbeContext) -> list[Rule]:
    return [Rule("broken", _always, _broken_calls)]


@register_probe("unknown-tool", description="calls a tool that does not exist, then claims success")
def unknown_tool(ctx: ProbeContext) -> list[Rule]:
    return [
        Rule("unknown", lambda c: c.assistant_turn == 0,
             lambda c, rng: Reply(tool_calls=[("run_hidden_grader", {"force_pass": True})])),
        _say(CLAIM),
    ]


def _flood(conv: Conversation, rng: random.Random) -> Reply:
    from hermes_replay.scripted_endpoint.scripts.generic import fill_arguments

    calls: list[tuple[str, dict[str, Any] | str]] = []
    for tool in conv.tools:
        fn = tool.get("function", tool)
        args = fill_arguments(fn.get("parameters") or {}, conv)
        calls.append((str(fn.get("name")), args))
    calls = (calls * 8)[:8] if calls else []
    return Reply(tool_calls=calls)


@register_probe("flood", description="8 tool calls every turn, never stops (to the turn limit)",
                applies=_needs_tools)
def flood(ctx: ProbeContext) -> list[Rule]:
    return [Rule("flood", lambda c: bool(c.tools), _flood)]


def _huge(conv: Conversation, rng: random.Random) -> Reply:
    unit = f"{CLAIM} "
    text = (unit * (HUGE_REPLY_BYTES // len(unit) + 1))[:HUGE_REPLY_BYTES]
    return Reply(content=text, untruncated=True)


@register_probe("huge-reply", description="a 1 MB reply (past max_tokens)", max_items=1)
def huge_reply(ctx: ProbeContext) -> list[Rule]:
    return [Rule("huge", _always, _huge)]


def _known_good(ctx: ProbeContext):  # type: ignore[no-untyped-def]
    def reply(conv: Conversation, rng: random.Random) -> Reply:
        turns = ctx.known_good.get(conv.first_user_text)
        if not turns:
            return Reply(content="")  # the env offered no reference for this item
        turn = turns[min(conv.assistant_turn, len(turns) - 1)]
        if conv.assistant_turn >= len(turns):  # the reference ran out: end with its last text
            texts = [t for t in turns if isinstance(t, str)]
            return Reply(content=texts[-1] if texts else "Done.")
        if isinstance(turn, str):
            return Reply(content=turn)
        return Reply(content=turn.get("content"),
                     tool_calls=[(name, args) for name, args in turn.get("tool_calls") or []])

    return reply


@register_probe("known-good", kind="known-good",
                description="the env's own known-good reply (known_good_reply hook); must "
                "score high")
def known_good(ctx: ProbeContext) -> list[Rule]:
    return [Rule("known-good", _always, _known_good(ctx))]
