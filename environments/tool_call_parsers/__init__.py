"""Tool-call parsers: raw model text <-> OpenAI tool calls, one small module per format family.

Used in Phase 2 (vLLM/SGLang ``/generate`` returns raw text) and whenever an OpenAI-style server
returned no ``tool_calls`` but the text holds some. ``get_parser(config.tool_call_parser)`` picks
one by name; ``render`` writes calls back in the same format (the scripted endpoint's raw-text
replies and the round-trip tests use it).

Registered names (aliases in parentheses): hermes (qwen), longcat, mistral, llama3_json,
llama4_json, deepseek_v3, deepseek_v3_1 (deepseek_v31), kimi_k2, glm45, glm47, qwen3_coder.
``list_parsers()`` returns all of these names, aliases included, as a new sorted list.
Add a format with ``@register_parser("name", *aliases)`` on a ``ToolCallParser`` subclass.
"""

# Importing the format modules registers them.
from . import deepseek, glm, hermes, kimi_k2, llama, mistral, qwen3_coder  # noqa: F401
from ._base import ChatCompletionMessageToolCall, ParseResult, ToolCallParser
from ._registry import get_parser, list_parsers, register_parser

__all__ = [
    "ChatCompletionMessageToolCall",
    "ParseResult",
    "ToolCallParser",
    "get_parser",
    "list_parsers",
    "register_parser",
]
