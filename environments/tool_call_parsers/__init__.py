"""Tool-call parsers: raw model text <-> OpenAI tool calls, one small module per format family.

Used in Phase 2 (vLLM/SGLang ``/generate`` returns raw text) and whenever an OpenAI-style server
returned no ``tool_calls`` but the text holds some. ``get_parser(config.tool_call_parser)`` picks
one by name; ``render`` writes calls back in the same format (the scripted endpoint's raw-text
replies and the round-trip tests use it).

Registered names (aliases in parentheses): hermes, qwen, longcat, mistral, llama3_json,
llama4_json, deepseek_v3, deepseek_v3_1 (deepseek_v31), kimi_k2, glm45, glm47, qwen3_coder.
``list_parsers()`` returns all of these names, aliases included, as a new sorted list.
Add a format with ``@register_parser("name", *aliases)`` on a ``ToolCallParser`` subclass.
``PARSER_REGISTRY`` is a read-only mapping name → class; the former layer's module names
(``environments.tool_call_parsers.<x>_parser``) and class names are importable too.
"""

# Importing the format modules registers them.
from . import deepseek, glm, hermes, kimi_k2, llama, mistral, qwen3_coder  # noqa: F401
from ._base import ChatCompletionMessageToolCall, ParseResult, ToolCallParser
from ._registry import PARSER_REGISTRY, get_parser, list_parsers, register_parser
from .deepseek import DeepSeekV3ToolCallParser, DeepSeekV31ToolCallParser
from .glm import Glm45ToolCallParser, Glm47ToolCallParser
from .hermes import HermesToolCallParser, LongcatToolCallParser, QwenToolCallParser
from .kimi_k2 import KimiK2ToolCallParser
from .llama import LlamaToolCallParser
from .mistral import MistralToolCallParser
from .qwen3_coder import Qwen3CoderToolCallParser

__all__ = [  # noqa: RUF022 - plain sorted(), as the public-names test checks
    "ChatCompletionMessageToolCall",
    "DeepSeekV31ToolCallParser",
    "DeepSeekV3ToolCallParser",
    "Glm45ToolCallParser",
    "Glm47ToolCallParser",
    "HermesToolCallParser",
    "KimiK2ToolCallParser",
    "LlamaToolCallParser",
    "LongcatToolCallParser",
    "MistralToolCallParser",
    "PARSER_REGISTRY",
    "ParseResult",
    "Qwen3CoderToolCallParser",
    "QwenToolCallParser",
    "ToolCallParser",
    "get_parser",
    "list_parsers",
    "register_parser",
]
