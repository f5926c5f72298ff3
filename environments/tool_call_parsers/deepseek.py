"""DeepSeek V3 and V3.1 tool calls (note the full-width bars and the ``▁`` in the markers).

V3 (``deepseek_v3``)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜>
    <｜tool▁call▁begin｜>function<｜tool▁sep｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 (``deepseek_v3_1``, alias ``deepseek_v31``) drops the type and the fence::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
    <｜tool▁call▁end｜><｜tool▁calls▁end｜>      (one line, wrapped here)

The content is the text before ``<｜tool▁calls▁begin｜>`` (or before the first call if a model
omits the section marker). An unclosed final call counts when its JSON is complete.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    decode_object_prefix,
    dumps_args,
    iter_tagged_blocks,
    make_call,
)
from ._registry import register_parser

CALLS_BEGIN, CALLS_END = tool_formats.DS_CALLS_BEGIN, tool_formats.DS_CALLS_END
CALL_BEGIN, CALL_END = tool_formats.DS_CALL_BEGIN, tool_formats.DS_CALL_END
SEP = tool_formats.DS_SEP


@register_parser("deepseek_v3")
class DeepSeekV3ToolCallParser(ToolCallParser):
    #: V3 writes ``function<sep>NAME\n```json ...```; V3.1 writes ``NAME<sep>ARGS``
    typed: ClassVar[bool] = True

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        section = text.find(CALLS_BEGIN)
        first_call = text.find(CALL_BEGIN)
        if first_call < 0:
            return text, []
        content_end = section if 0 <= section < first_call else first_call
        calls: list[ChatCompletionMessageToolCall] = []
        for body, closed in iter_tagged_blocks(text, CALL_BEGIN, CALL_END, first_call):
            try:
                name, args = self._split(body)
            except MalformedToolCall:
                if closed:
                    raise
                break  # truncated final call
            calls.append(make_call(name, args, len(calls)))
        return text[:content_end], calls

    def _split(self, body: str) -> tuple[str, dict[str, Any]]:
        head, sep, rest = body.partition(SEP)
        if not sep:
            raise MalformedToolCall(f"no {SEP} in a DeepSeek tool call")
        if self.typed:
            if head.strip() != "function":
                raise MalformedToolCall(f"unsupported DeepSeek tool type {head.strip()!r}")
            name, newline, rest = rest.partition("\n")
            if not newline:
                raise MalformedToolCall("no arguments after the tool name")
        else:
            name = head
        # decode_object_prefix skips the ```json fence; the closing fence is trailing text
        return name, decode_object_prefix(rest)

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_deepseek(content, calls, typed=self.typed)

    def _render_call(self, name: str, args: dict[str, Any]) -> str:
        if self.typed:
            return f"{CALL_BEGIN}function{SEP}{name}\n```json\n{dumps_args(args)}\n```{CALL_END}"
        return f"{CALL_BEGIN}{name}{SEP}{dumps_args(args)}{CALL_END}"


@register_parser("deepseek_v3_1", "deepseek_v31")
class DeepSeekV31ToolCallParser(DeepSeekV3ToolCallParser):
    typed: ClassVar[bool] = False
