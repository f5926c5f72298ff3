"""GLM-4.5 / GLM-4.6 (``glm45``) and GLM-4.7 (``glm47``) XML-ish tool calls.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

GLM's template writes string values bare and everything else as JSON, so a value is read as JSON
if it parses, else as a Python literal (older checkpoints write ``True``/``None``), else as the
string itself. That makes the string ``"42"`` come back as the number 42 — with no tool schema at
parse time there is nothing better to go on. GLM-4.7 writes the calls without newlines and may put
whitespace or a literal backslash-n between ``</arg_key>`` and ``<arg_value>``; ``glm47`` accepts
that. There is no end-of-call signal inside a block, so an unclosed final block is dropped.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, ClassVar

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    iter_tagged_blocks,
    loads_value,
    make_call,
)
from ._registry import register_parser

OPEN, CLOSE = tool_formats.HERMES_OPEN, tool_formats.HERMES_CLOSE
KEY_OPEN = "<arg_key>"


def coerce_value(raw: str) -> Any:
    """JSON if it parses, else a Python literal that is JSON-serialisable, else the raw string."""
    stripped = raw.strip()
    try:
        return loads_value(stripped)
    except ValueError:
        pass
    try:
        value = ast.literal_eval(stripped)
        json.dumps(value, allow_nan=False)  # sets, bytes, complex, nan: keep the text instead
        return value
    except Exception:
        return raw


@register_parser("glm45")
class Glm45ToolCallParser(ToolCallParser):
    arg_re: ClassVar[re.Pattern[str]] = re.compile(
        r"<arg_key>([^<>]*)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL
    )
    #: glm47 may write a literal backslash-n where glm45 writes whitespace
    literal_newline: ClassVar[bool] = False
    #: between the name and the first key, and after each value, in render
    newline: ClassVar[str] = "\n"

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        first = text.find(OPEN)
        if first < 0:
            return text, []
        calls: list[ChatCompletionMessageToolCall] = []
        for body, closed in iter_tagged_blocks(text, OPEN, CLOSE, first):
            if not closed:
                break
            calls.append(self._call(body, len(calls)))
        return text[:first], calls

    def _call(self, body: str, index: int) -> ChatCompletionMessageToolCall:
        key_at = body.find(KEY_OPEN)
        name = self._strip_gaps(body if key_at < 0 else body[:key_at])
        arg_text = "" if key_at < 0 else body[key_at:]
        args: dict[str, Any] = {}
        matched_to = 0
        for match in self.arg_re.finditer(arg_text):
            if self._strip_gaps(arg_text[matched_to : match.start()]):
                raise MalformedToolCall(f"unexpected text between GLM arguments in {body[:60]!r}")
            args[match[1].strip()] = coerce_value(match[2])
            matched_to = match.end()
        if self._strip_gaps(arg_text[matched_to:]):
            raise MalformedToolCall(f"unparsed GLM argument markup in {body[:60]!r}")
        return make_call(name, args, index)

    def _strip_gaps(self, text: str) -> str:
        """Strip separators from both ends: whitespace, and for glm47 a literal backslash-n."""
        while True:
            stripped = text.strip()
            if self.literal_newline:
                stripped = stripped.removeprefix("\\n").removesuffix("\\n")
            if stripped == text:
                return text
            text = stripped

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_glm(content, calls, newline=self.newline)

@register_parser("glm47")
class Glm47ToolCallParser(Glm45ToolCallParser):
    arg_re: ClassVar[re.Pattern[str]] = re.compile(
        r"<arg_key>([^<>]*)</arg_key>(?:\\n|\s)*<arg_value>(.*?)</arg_value>", re.DOTALL
    )
    literal_newline: ClassVar[bool] = True
    newline: ClassVar[str] = ""
