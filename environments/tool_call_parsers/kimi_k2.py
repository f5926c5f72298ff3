"""Kimi K2 tool calls; the model writes its own ids, which are kept as the call ids.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>
    (one line, wrapped here)

The id is ``functions.NAME:INDEX``; the name is what lies between the ``functions.`` prefix and
the final ``:INDEX``. Kimi's template replays the id verbatim in later turns, so replacing it
would change the prompt the model sees. Some checkpoints write the singular
``<|tool_call_section_begin|>``; both spellings are accepted.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    decode_object_prefix,
    iter_tagged_blocks,
    make_call,
)
from ._registry import register_parser

SECTION_BEGINS, SECTION_END = tool_formats.KIMI_SECTION_BEGINS, tool_formats.KIMI_SECTION_END
CALL_BEGIN, CALL_END = tool_formats.KIMI_CALL_BEGIN, tool_formats.KIMI_CALL_END
ARG_BEGIN = tool_formats.KIMI_ARG_BEGIN
_ID_RE = re.compile(r"(?:functions\.)?(?P<name>.+?)(?::\d+)?")


@register_parser("kimi_k2")
class KimiK2ToolCallParser(ToolCallParser):
    keeps_model_ids = True

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        first_call = text.find(CALL_BEGIN)
        if first_call < 0:
            return text, []
        sections = [i for i in (text.find(tag) for tag in SECTION_BEGINS) if 0 <= i < first_call]
        content_end = min(sections, default=first_call)
        calls: list[ChatCompletionMessageToolCall] = []
        for body, closed in iter_tagged_blocks(text, CALL_BEGIN, CALL_END, first_call):
            call_id, sep, rest = body.partition(ARG_BEGIN)
            try:
                if not sep:
                    raise MalformedToolCall(f"no {ARG_BEGIN} in a Kimi tool call")
                args = decode_object_prefix(rest)
            except MalformedToolCall:
                if closed:
                    raise
                break  # truncated final call
            call_id = call_id.strip()
            match = _ID_RE.fullmatch(call_id)
            if not match:
                raise MalformedToolCall(f"cannot read a tool name from the Kimi id {call_id!r}")
            calls.append(make_call(match["name"], args, len(calls), call_id=call_id))
        return text[:content_end], calls

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_kimi_k2(content, calls)
