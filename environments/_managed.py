"""Phase 2 glue: tool calls through atroposlib's ``ManagedServer`` without vLLM installed.

``ManagedServer`` (vLLM/SGLang ``/generate`` behind a chat interface) renders the conversation with
the tokenizer's chat template and tracks tokens, masks and logprobs. It only renders tools and
parses tool calls when it has a "translator"; its own one needs the ``vllm`` package, and without
it the tools are left out of the prompt and markup tokens are decoded away.

:class:`ParserTranslator` fills that seam with our own parsers (``environments.tool_call_parsers``),
implementing the two methods ``ManagedServer`` calls:

* ``parse_model_output(raw_text, tool_choice, tools)`` → ``(content, tool_calls, finish_reason)``;
* ``convert_messages_for_template(messages)`` → messages where every assistant turn with tool
  calls is replaced by the exact raw text the model generated (remembered by call id), so the
  re-rendered prompt extends the tracked sequence byte for byte and the managed state stays one
  sequence per rollout with every assistant turn unmasked.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


class ParserTranslator:
    """A ``ManagedServer`` translator backed by one of our tool-call parsers."""

    def __init__(self, parser_name: str, end_tokens: tuple[str, ...] = ()) -> None:
        from environments.tool_call_parsers import get_parser

        self.parser = get_parser(parser_name)
        self.call_id_to_raw_text: dict[str, str] = {}
        # With tools, ManagedServer decodes special tokens too, so replies end in the EOS text;
        # the chat template writes its own, so it is cut here (else it would appear twice).
        self.end_tokens = tuple(t for t in end_tokens if t)

    def _strip_end(self, text: str) -> str:
        changed = True
        while changed:
            changed = False
            for token in self.end_tokens:
                if text.endswith(token):
                    text, changed = text[: -len(token)], True
        return text

    def parse_model_output(
        self, raw_text: str, tool_choice: str | None = None, tools: list[dict] | None = None
    ) -> tuple[str | None, list[Any] | None, str]:
        raw_text = self._strip_end(raw_text or "")
        if tool_choice == "none" or not tools:
            return raw_text, None, "stop"
        content, calls = self.parser.parse(raw_text)
        if not calls:
            return raw_text, None, "stop"
        for call in calls:
            self.call_id_to_raw_text[call.id] = raw_text
        return content, calls, "tool_calls"

    def convert_messages_for_template(self, messages: list[dict[str, Any]]) -> list[dict]:
        converted = []
        for msg in messages:
            calls = msg.get("tool_calls") if msg.get("role") == "assistant" else None
            if not calls:
                converted.append(msg)
                continue
            first_id = _call_id(calls[0])
            raw = self.call_id_to_raw_text.get(first_id)
            if raw is None:
                # Not produced through this translator (e.g. a seeded few-shot turn): render it
                # in the parser's format, which is what the model would have written.
                pairs = [(_fn(c).get("name", ""), _args(_fn(c).get("arguments"))) for c in calls]
                raw = self.parser.render(msg.get("content"), pairs)
            converted.append({"role": "assistant", "content": raw})
        return converted


def _call_id(call: Any) -> str:
    return str(call.get("id", "")) if isinstance(call, dict) else str(getattr(call, "id", ""))


def _fn(call: Any) -> dict[str, Any]:
    if isinstance(call, dict):
        fn = call.get("function", call)
        return fn if isinstance(fn, dict) else {}
    fn = getattr(call, "function", None)
    return {"name": getattr(fn, "name", ""), "arguments": getattr(fn, "arguments", "{}")}


def _args(arguments: Any) -> dict[str, Any]:
    import json

    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def install_translator(managed: Any, parser_name: str) -> None:
    """Give a ``ManagedServer`` our translator (DummyManagedServer and proxies are left alone)."""
    if hasattr(managed, "_translator") and hasattr(managed, "_get_translator"):
        tokenizer = getattr(managed, "tokenizer", None)
        ends = (getattr(tokenizer, "eos_token", None), getattr(tokenizer, "pad_token", None))
        managed._translator = ParserTranslator(parser_name, tuple(t for t in ends if t))


def final_sequence(state: dict[str, Any]) -> tuple[list[int], list[int], list[float]] | None:
    """``(tokens, masks, logprobs)`` of the rollout's sequence in a managed state.

    With exact re-rendering there is one node; if a template broke prefix extension there are
    several, and the longest (the whole conversation, last turn unmasked) is the one to train on.
    """
    nodes = list(state.get("nodes") or [])
    if not nodes:
        return None
    if len(nodes) > 1:
        logger.warning(
            "managed state has %d sequences (prompt re-rendering did not extend the previous "
            "turn); using the longest, earlier assistant turns are masked", len(nodes)
        )
    node = max(nodes, key=lambda n: len(n.tokens))
    return list(node.tokens), list(node.masked_tokens), [float(x) for x in node.logprobs]
