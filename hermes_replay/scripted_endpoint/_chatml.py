"""ChatML text ⇄ conversation, for the endpoints that see raw text (``/generate``, completions).

The project tokenizer's template renders ``<|im_start|>role\\n…<|im_end|>`` turns, the tools as
``<tools>…</tools>`` in the system turn, assistant calls as Hermes ``<tool_call>{json}</tool_call>``
and tool results wrapped in ``<tool_response>…</tool_response>`` (role ``tool``, or several inside
one ``user`` turn as Qwen templates do). Parsing is tolerant: a stand-in should answer whatever a
client sends, and a rule can still inspect ``conv.messages`` if the parse was partial.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_replay import tool_formats

_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S)
_TOOLS = re.compile(r"<tools>(.*?)</tools>", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
_THINK = re.compile(r"<think>(.*?)</think>\s*", re.S)


def is_chatml(text: str) -> bool:
    return "<|im_start|>" in text


def parse_chatml(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(messages, tools)`` recovered from a ChatML prompt.

    The trailing open ``<|im_start|>assistant`` (the generation prompt) is not a message.
    """
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    call_ids: list[str] = []
    for match in _TURN.finditer(text):
        role, body = match.group(1), match.group(2)
        closed = match.group(0).endswith("<|im_end|>")
        if role == "assistant" and not closed and not body.strip():
            continue  # generation prompt
        if role == "system":
            blocks = [b for b in _TOOLS.findall(body) if b.strip()]
            if blocks:
                for block in blocks:
                    tools.extend(_parse_tools(block))
                # Templates wrap the tools in boilerplate ("# Tools ... <tools></tools> ...");
                # the system prompt proper is what comes before it.
                cut = body.find("# Tools")
                body = body[:cut] if cut >= 0 else _TOOLS.sub("", body)
            body = body.strip()
            if body:
                messages.append({"role": "system", "content": body})
        elif role == "assistant":
            msg = _parse_assistant(body, turn=len(messages))
            call_ids.extend(tc["id"] for tc in msg.get("tool_calls", []))
            messages.append(msg)
        elif role in ("tool", "user") and _TOOL_RESPONSE.search(body) and (
            role == "tool" or not _TOOL_RESPONSE.sub("", body).strip()
        ):
            for result in _TOOL_RESPONSE.findall(body):
                tool_call_id = call_ids.pop(0) if call_ids else "call_unknown"
                messages.append({"role": "tool", "tool_call_id": tool_call_id, "content": result})
        else:
            messages.append({"role": role, "content": body})
    return messages, tools


def _parse_tools(block: str) -> list[dict[str, Any]]:
    block = block.strip()
    try:
        parsed = json.loads(block)
        items = parsed if isinstance(parsed, list) else [parsed]
    except ValueError:
        items = []
        for line in block.splitlines():
            try:
                items.append(json.loads(line))
            except ValueError:
                continue
    tools = []
    for item in items:
        if isinstance(item, dict):
            tools.append(item if "function" in item else {"type": "function", "function": item})
    return tools


def _parse_assistant(body: str, turn: int) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant"}
    think = _THINK.search(body)
    if think:
        msg["reasoning_content"] = think.group(1).strip()
        body = _THINK.sub("", body, count=1)
    calls = []
    for i, raw in enumerate(_TOOL_CALL.findall(body)):
        try:
            data = json.loads(raw.strip())
        except ValueError:
            continue
        if not isinstance(data, dict) or "name" not in data:
            continue
        args = data.get("arguments", data.get("parameters", {}))
        calls.append(
            {
                "id": f"call_{turn}_{i}",
                "type": "function",
                "function": {
                    "name": str(data["name"]),
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    content = _TOOL_CALL.sub("", body).strip() if calls else body.strip()
    msg["content"] = content or None
    if calls:
        msg["tool_calls"] = calls
    return msg


def render_reply(
    content: str | None,
    calls: list[tuple[str, dict[str, Any]]],
    reasoning: str | None,
    fmt: str,
) -> str:
    """The reply as raw model text, tool calls written in format ``fmt`` by the same renderer
    the tool-call parsers use (``hermes_replay.tool_formats``)."""
    prefix = f"<think>{reasoning}</think>\n" if reasoning else ""
    if not calls:
        return prefix + (content or "")
    try:
        return prefix + tool_formats.render(fmt, content, calls)
    except KeyError as exc:
        raise ValueError(f"scripted endpoint: raw_tool_format {fmt!r}: {exc.args[0]}") from None
