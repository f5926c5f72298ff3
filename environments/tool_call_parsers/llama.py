"""Llama 3.1+/Llama 4 JSON tool calling (``llama3_json``, ``llama4_json``).

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": ...}

The ``<|python_tag|>`` is optional, the arguments key is ``parameters`` (Meta's templates) or
``arguments``, and several calls are separated by ``;`` or newlines. Without the tag the first
JSON object shaped like a call (``name`` plus ``parameters``/``arguments``) starts the calls, so a
sentence before them becomes the content. Text after the last complete call (an end-of-turn
token, a truncated call) is dropped.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    decode_prefix,
)
from ._registry import register_parser
from .hermes import call_from_object

PYTHON_TAG = tool_formats.PYTHON_TAG
_SEPARATORS = " \t\r\n;"
_OBJECT_START = re.compile(r'\{\s*"')


def _is_call(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and ("parameters" in value or "arguments" in value)
    )


@register_parser("llama3_json", "llama4_json")
class LlamaToolCallParser(ToolCallParser):
    """Llama 3 and Llama 4 emit the same JSON calls (one class under both names, as before)."""

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        tag = text.find(PYTHON_TAG)
        if tag >= 0:
            content_end, pos = tag, tag + len(PYTHON_TAG)
        else:
            pos = self._find_first_call(text)
            if pos < 0:
                return text, []
            content_end = pos
        calls: list[ChatCompletionMessageToolCall] = []
        while True:
            while pos < len(text) and text[pos] in _SEPARATORS:
                pos += 1
            if pos >= len(text) or text[pos] not in "{[":
                break
            try:
                value, pos = decode_prefix(text, pos)
            except MalformedToolCall:
                if not calls:
                    raise
                break  # truncated final call
            items = value if isinstance(value, list) else [value]
            if not all(_is_call(v) for v in items):
                if not calls:
                    raise MalformedToolCall("JSON after the python tag is not a tool call")
                break
            for v in items:
                calls.append(call_from_object(v, len(calls)))
        return text[:content_end], calls

    @staticmethod
    def _find_first_call(text: str) -> int:
        # only objects whose first key is a string can be calls: skips most braces in code fast
        for match in _OBJECT_START.finditer(text):
            try:
                value, _ = decode_prefix(text, match.start())
            except MalformedToolCall:
                continue
            if _is_call(value):
                return match.start()
        return -1

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_llama_json(content, calls)

#: the names this module used before the former layer's single class name was adopted
Llama3JsonToolCallParser = LlamaToolCallParser
Llama4JsonToolCallParser = LlamaToolCallParser
