"""Qwen3-Coder XML tool calls.

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Qwen3-Coder often leaves tags unclosed or drops the ``<tool_call>`` wrapper, so this parser keys on
``<function=`` and lets a parameter end at ``</parameter>``, the next ``<parameter=``,
``</function>`` or the end of the text; a function ends at ``</function>``, the next
``<function=`` or the end. One newline on each side of a value is the template's padding and is
removed. Values are JSON if they parse, else strings (the template writes strings bare; without the
tool schema a string ``"42"`` reads back as 42). A call whose ``<function=NAME>`` tag itself was cut
off is dropped, as is a parameter whose name tag was.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    loads_value,
    make_call,
)
from ._registry import register_parser

WRAP_OPEN, WRAP_CLOSE = tool_formats.HERMES_OPEN, tool_formats.HERMES_CLOSE
FUNC_OPEN, FUNC_CLOSE = tool_formats.QC_FUNC_OPEN, tool_formats.QC_FUNC_CLOSE
PARAM_OPEN, PARAM_CLOSE = tool_formats.QC_PARAM_OPEN, tool_formats.QC_PARAM_CLOSE
_FUNC_END = re.compile(re.escape(FUNC_CLOSE) + "|" + re.escape(FUNC_OPEN))
_PARAM_END = re.compile("|".join(re.escape(t) for t in (PARAM_CLOSE, PARAM_OPEN, FUNC_CLOSE)))


def coerce_value(raw: str) -> Any:
    try:
        return loads_value(raw)
    except ValueError:
        return raw


def _unpad(value: str) -> str:
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


@register_parser("qwen3_coder")
class Qwen3CoderToolCallParser(ToolCallParser):
    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        first_func = text.find(FUNC_OPEN)
        if first_func < 0:
            return text, []
        wrap = text.find(WRAP_OPEN)
        content_end = wrap if 0 <= wrap < first_func else first_func
        calls: list[ChatCompletionMessageToolCall] = []
        pos = first_func
        while pos >= 0:
            end_match = _FUNC_END.search(text, pos + len(FUNC_OPEN))
            block_end = end_match.start() if end_match else len(text)
            block = text[pos + len(FUNC_OPEN) : block_end]
            call = self._call(block, len(calls), truncated=end_match is None)
            if call is not None:
                calls.append(call)
            pos = text.find(FUNC_OPEN, block_end)
        return text[:content_end], calls

    @staticmethod
    def _call(block: str, index: int, truncated: bool) -> ChatCompletionMessageToolCall | None:
        name, gt, rest = block.partition(">")
        if not gt:
            if truncated:
                return None
            raise MalformedToolCall(f"unterminated <function= tag: {block[:60]!r}")
        args: dict[str, Any] = {}
        pos = rest.find(PARAM_OPEN)
        while pos >= 0:
            start = pos + len(PARAM_OPEN)
            key, gt, _ = rest[start:].partition(">")
            if not gt:
                break  # the parameter tag itself was cut off
            value_start = start + len(key) + 1
            end_match = _PARAM_END.search(rest, value_start)
            value_end = end_match.start() if end_match else len(rest)
            args[key.strip()] = coerce_value(_unpad(rest[value_start:value_end]))
            pos = rest.find(PARAM_OPEN, value_end)
        return make_call(name, args, index)

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_qwen3_coder(content, calls)
