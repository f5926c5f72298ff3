"""Mistral: ``[TOOL_CALLS]`` then the calls, in one of two generations of the format.

* before tokenizer v11: ``[TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]`` (an array, or a
  single object);
* v11 and later: ``[TOOL_CALLS]f{...}[TOOL_CALLS]g{...}`` — the marker repeated per call, the name
  written bare; some checkpoints put ``[ARGS]`` (and ``[CALL_ID]id``) between name and
  arguments, accepted too.

Mistral's chat templates reject tool-call ids that are not exactly 9 alphanumerics, so the
generated ids here follow that shape (still derived from a hash, so deterministic).
"""

from __future__ import annotations

import string
from typing import Any

from hermes_replay import tool_formats

from ._base import (
    ChatCompletionMessageToolCall,
    MalformedToolCall,
    ToolCallParser,
    decode_object_prefix,
    decode_prefix,
    id_digest,
    make_call,
)
from ._registry import register_parser

MARKER = tool_formats.MISTRAL_MARKER
ARGS_MARKER = "[ARGS]"
CALL_ID_MARKER = "[CALL_ID]"
_ALNUM = string.ascii_letters + string.digits


def mistral_call_id(name: str, arguments: str, index: int, text: str = "") -> str:
    """9 alphanumerics from :func:`id_digest`, as Mistral templates require."""
    n = int.from_bytes(id_digest(name, arguments, index, text)[:8], "big")
    chars = []
    for _ in range(9):
        n, r = divmod(n, len(_ALNUM))
        chars.append(_ALNUM[r])
    return "".join(chars)


@register_parser("mistral")
class MistralToolCallParser(ToolCallParser):
    #: render the v11+ form; set False (subclass or instance) to render the legacy JSON array
    render_v11: bool = True

    def call_id(self, call: ChatCompletionMessageToolCall, index: int, text: str) -> str:
        return mistral_call_id(call.function.name, call.function.arguments, index, text)

    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        first = text.find(MARKER)
        if first < 0:
            return text, []
        segments = text[first + len(MARKER) :].split(MARKER)
        calls: list[ChatCompletionMessageToolCall] = []
        for i, segment in enumerate(segments):
            last = i == len(segments) - 1
            if segment.lstrip()[:1] in ("[", "{"):
                objs, complete = self._decode_legacy(segment)
                for obj in objs:
                    if not isinstance(obj, dict) or "name" not in obj:
                        raise MalformedToolCall("tool call JSON must be an object with a 'name'")
                    args = obj.get("arguments", obj.get("parameters"))
                    calls.append(make_call(obj["name"], args, len(calls)))
            else:
                call = self._decode_v11(segment, len(calls))
                complete = call is not None
                if call is not None:
                    calls.append(call)
            if not complete:
                if not last:
                    raise MalformedToolCall(f"incomplete call before another {MARKER}")
                break  # the final call was cut off (truncated output): keep the complete ones
        return text[:first], calls

    @staticmethod
    def _decode_legacy(segment: str) -> tuple[list[Any], bool]:
        """Decode an object or an array element by element, so a truncated array keeps its
        complete leading calls. Returns (objects, whether the JSON was complete)."""
        s = segment.lstrip()
        if s.startswith("{"):
            try:
                value, _ = decode_prefix(s)
            except MalformedToolCall:
                return [], False
            return [value], True
        objs: list[Any] = []
        pos = 1
        while True:
            while pos < len(s) and s[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(s):
                return objs, False
            if s[pos] == "]":
                return objs, True
            try:
                value, pos = decode_prefix(s, pos)
            except MalformedToolCall:
                return objs, False
            objs.append(value)

    @staticmethod
    def _decode_v11(segment: str, index: int) -> ChatCompletionMessageToolCall | None:
        """``name{json}`` / ``name[ARGS]{json}``; None when the JSON is missing or incomplete."""
        brace = segment.find("{")
        if brace < 0:
            return None
        try:
            args = decode_object_prefix(segment, brace)
        except MalformedToolCall:
            return None
        name = segment[:brace].strip()
        if name.endswith(ARGS_MARKER):
            name = name[: -len(ARGS_MARKER)].strip()
        # ``name[CALL_ID]abc123XYZ[ARGS]{...}``: the id the model wrote is not kept (ids are
        # generated for every mistral call, see ``call_id``)
        name = name.partition(CALL_ID_MARKER)[0].strip()
        return make_call(name, args, index)

    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return tool_formats.render_mistral(content, calls, v11=self.render_v11)
