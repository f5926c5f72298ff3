"""Hermes / Qwen 2.5+ format, and LongCat's copy of it with its own tag.

    some text
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Several calls per message. Truncated output (max_tokens hit) often ends inside the last call:
a final unclosed ``<tool_call>`` still counts when its JSON is complete and is dropped when it is
not, so the calls that were complete are not lost. A closed block that is not valid JSON is a
malformed message -> ``(text, None)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    decode_prefix,
    iter_tagged_blocks,
    make_call,
)
from ._registry import register_parser


def call_from_object(obj: Any, index: int) -> ChatCompletionMessageToolCall:
    """``{"name": ..., "arguments"|"parameters": {...}}`` -> tool call (shared by JSON formats)."""
    if not isinstance(obj, dict) or "name" not in obj:
        raise MalformedToolCall("tool call JSON must be an object with a 'name'")
    args = obj.get("arguments", obj.get("parameters"))
    return make_call(obj["name"], args, index)


@register_parser("hermes")
class HermesToolCallParser(ToolCallParser):
    open_tag: ClassVar[str] = tool_formats.HERMES_OPEN
    close_tag: ClassVar[str] = tool_formats.HERMES_CLOSE

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        first = text.find(self.open_tag)
        if first < 0:
            return text, []
        calls: list[ChatCompletionMessageToolCall] = []
        for body, closed in iter_tagged_blocks(text, self.open_tag, self.close_tag, first):
            try:
                objs = self._decode_body(body)
            except MalformedToolCall:
                if closed:
                    raise
                break  # truncated final call: keep what was complete
            for obj in objs:
                calls.append(call_from_object(obj, len(calls)))
        return text[:first], calls

    @staticmethod
    def _decode_body(body: str) -> list[Any]:
        value, end = decode_prefix(body)
        if body[end:].strip():
            raise MalformedToolCall(f"unexpected text after the call JSON: {body[end:][:40]!r}")
        # a few fine-tunes put a list of calls in one block; accept it
        return value if isinstance(value, list) else [value]

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_hermes(content, calls, open_tag=self.open_tag,
                                          close_tag=self.close_tag)

@register_parser("longcat")
class LongcatToolCallParser(HermesToolCallParser):
    """LongCat-Flash: the hermes format inside ``<longcat_tool_call>`` tags."""

    open_tag: ClassVar[str] = tool_formats.LONGCAT_OPEN
    close_tag: ClassVar[str] = tool_formats.LONGCAT_CLOSE


@register_parser("qwen")
class QwenToolCallParser(HermesToolCallParser):
    """Qwen 2.5 writes Hermes-style ``<tool_call>`` JSON; its own class, as in the former layer."""
