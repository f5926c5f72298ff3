"""The parser interface and the helpers every format shares.

A parser turns the raw text a model generated (Phase 2: vLLM/SGLang ``/generate`` output, or an
OpenAI-style server that did not extract tool calls itself) into OpenAI-shaped tool calls, and
``render`` does the inverse so that scripted endpoints and round-trip tests can produce raw text
in exactly the format a real model would.

The shared contract (DESIGN section 3), enforced here once rather than in every format:

* no calls            -> ``(text, None)`` with ``text`` untouched;
* calls               -> ``(text before the first call marker, stripped, or None, calls)``;
* any parse failure   -> ``(text, None)``; ``parse`` never raises;
* ``function.arguments`` is always a JSON object serialised with ``json.dumps(ensure_ascii=False)``
  so the same call always produces the same bytes (cassettes replay byte-identically);
* ids are deterministic when the format carries none (see :func:`id_digest`): the same raw text
  always yields the same ids, the same call in another text another id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)

from hermes_replay import tool_formats

# openai 3.x: ``ChatCompletionMessageToolCall`` is a compatibility alias of the function-call
# class (the union of function and custom calls is ``ChatCompletionMessageToolCallUnion``).
# Import the concrete class so construction works on every 3.x release.
ChatCompletionMessageToolCall = ChatCompletionMessageFunctionToolCall

ParseResult = tuple[str | None, list[ChatCompletionMessageToolCall] | None]

logger = logging.getLogger(__name__)

# Tool names never contain whitespace, markup or JSON punctuation; rejecting them turns
# "the wrong parser was configured" into a clean (text, None) instead of a garbage call.
_NAME_RE = re.compile(r"[^\s<>{}\[\]\"'`]+")


class MalformedToolCall(ValueError):
    """Raised inside a parser when the text has call markers but they do not parse.

    Internal: ``ToolCallParser.parse`` catches it (and anything else) and returns ``(text, None)``.
    """


class ToolCallParser(ABC):
    """One raw-text tool-call format. Subclasses implement ``_parse`` and ``render``.

    Parsers are stateless; ``get_parser`` returns a fresh instance each time anyway.
    """

    #: canonical registry name, set by ``register_parser``
    name: ClassVar[str] = ""
    #: True for formats whose text carries the call ids (kimi_k2); they are kept as written
    keeps_model_ids: ClassVar[bool] = False

    def parse(self, text: str) -> ParseResult:
        """Extract tool calls from ``text``; never raises (see the module docstring)."""
        if not isinstance(text, str) or not text:
            return text, None
        try:
            content, calls = self._parse(text)
        except Exception as exc:  # a parse failure must never kill a rollout
            logger.debug("%s parser: no tool calls parsed (%s); returning text", self.name, exc)
            return text, None
        if not calls:
            return text, None
        if not self.keeps_model_ids:
            calls = [
                call.model_copy(update={"id": self.call_id(call, index, text)})
                for index, call in enumerate(calls)
            ]
        return _clean_content(content), calls

    def call_id(self, call: ChatCompletionMessageToolCall, index: int, text: str) -> str:
        """The id of a call the format gives no id to (override for a format's id shape)."""
        return deterministic_call_id(call.function.name, call.function.arguments, index, text)

    @abstractmethod
    def _parse(self, text: str) -> tuple[str, list[ChatCompletionMessageToolCall]]:
        """Return (text before the first call marker, calls); raise on malformed input."""

    @abstractmethod
    def render(self, content: str | None, calls: list[tuple[str, dict[str, Any]]]) -> str:
        """Return the raw model text for ``content`` followed by ``calls`` in this format.

        Contract: for content without call markers and calls ``[(name, args_dict), ...]``,
        ``parse(render(content, calls))`` returns ``(content.strip() or None, calls)`` with the
        same names and arguments (formats that write string values unquoted — glm45/47,
        qwen3_coder — read back strings that look like JSON, e.g. ``"42"``, as JSON values).
        With no calls the result is ``content or ""``. Deterministic: same input, same bytes.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _clean_content(content: str | None) -> str | None:
    if content is None:
        return None
    content = content.strip()
    return content or None


# arguments are serialised the one way every parser and renderer uses
dumps_args = tool_formats.dumps_args


def id_digest(name: str, arguments: str, index: int, text: str = "") -> bytes:
    """sha256 over (index, name, arguments, the whole raw text) — the seed of generated ids.

    Random ids (uuid4) would make re-recorded cassettes differ on every run; a hash keeps them
    stable. Hashing the whole raw text too means the same call made in two different turns gets
    two different ids (code that maps ids back to the raw text, like the ManagedServer
    translator, would otherwise mix the turns up), while one raw text always yields one id.
    """
    # surrogatepass: a lone surrogate in decoded JSON must not make hashing raise
    key = f"{index}\x00{name}\x00{arguments}\x00{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).digest()


def deterministic_call_id(name: str, arguments: str, index: int, text: str = "") -> str:
    """``call_`` + 24 hex digits of :func:`id_digest` (the shape OpenAI ids have)."""
    return "call_" + id_digest(name, arguments, index, text).hex()[:24]


def check_name(name: Any) -> str:
    """Return the stripped tool name or raise ``MalformedToolCall``."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name.strip()):
        raise MalformedToolCall(f"invalid tool name {name!r}")
    return name.strip()


def normalize_args(args: Any) -> str:
    """Accept a dict, a JSON string of an object, or None; return canonical JSON text."""
    if args is None:
        return "{}"
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            raise MalformedToolCall(f"arguments are not JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise MalformedToolCall(f"arguments must be a JSON object, got {type(args).__name__}")
    return dumps_args(args)


def make_call(
    name: Any, args: Any, index: int, call_id: str | None = None
) -> ChatCompletionMessageToolCall:
    """Build one OpenAI tool call, validating the name and normalising the arguments.

    Without ``call_id`` a provisional id is derived; ``ToolCallParser.parse`` replaces it with
    one that also hashes the raw text (unless the parser ``keeps_model_ids``).
    """
    name = check_name(name)
    arguments = normalize_args(args)
    return ChatCompletionMessageToolCall(
        id=call_id or deterministic_call_id(name, arguments, index),
        type="function",
        function=Function(name=name, arguments=arguments),
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def loads_value(text: str) -> Any:
    """``json.loads`` for the XML-ish formats' bare values, where ``NaN``/``Infinity`` are words
    (plain ``json.loads`` would turn them into floats that then serialise as invalid JSON)."""
    return json.loads(text, parse_constant=_reject_constant)


_DECODER = json.JSONDecoder()
_FENCE_RE = re.compile(r"\s*(?:```(?:json)?\s*)?")


_WINDOW = 1024  # characters a JSON value is first decoded from (grown 4x while needed)
_LOOKAHEAD = 16  # an error this close to a window's end may be the cut's doing


def decode_prefix(text: str, pos: int = 0, window: int = _WINDOW) -> tuple[Any, int]:
    """Decode one JSON value at ``pos`` (after whitespace and an optional ```json fence).

    Returns (value, end index); trailing text (a closing fence, a closing tag) is the caller's
    business. Raises ``MalformedToolCall`` when no complete value is there — which is also how a
    truncated final call is recognised.

    Why windows: a ``JSONDecodeError`` counts the newlines before its position in the document
    it was given, so a parser that tries many starts in a long reply (llama's first-call
    search over a 50 MB text full of ``{"``) paid for the whole text at every failed start.
    The value is decoded from ``text[start:start + window]`` followed by a NUL first; the
    result is the whole text's unless the decoder got near the cut — a NUL is invalid
    everywhere in JSON, so an unterminated string or any value reaching the cut fails there
    rather than further back — and then the window grows, up to the whole text.
    """
    start = _FENCE_RE.match(text, pos).end()
    size = window
    while True:
        whole = start + size >= len(text)
        cut = len(text) - start if whole else size
        doc = text[start:] if whole else text[start:start + size] + "\0"
        try:
            value, end = _DECODER.raw_decode(doc)
        except ValueError as exc:
            if whole or getattr(exc, "pos", cut) < cut - _LOOKAHEAD:
                raise MalformedToolCall(
                    f"no complete JSON value at offset {start}: {exc}") from exc
        else:
            if whole or end < cut - _LOOKAHEAD:  # a number ending at the cut may go on
                return value, start + end
        size *= 4


def decode_object_prefix(text: str, pos: int = 0) -> dict[str, Any]:
    """Like ``decode_prefix`` but the value must be a JSON object (tool-call arguments)."""
    value, _ = decode_prefix(text, pos)
    if not isinstance(value, dict):
        raise MalformedToolCall(f"expected a JSON object, got {type(value).__name__}")
    return value


def strip_partial_suffix(text: str, tag: str) -> str:
    """Drop a truncated prefix of ``tag`` from the end of ``text`` (``…}</tool_`` -> ``…}``)."""
    for k in range(len(tag) - 1, 0, -1):
        if text.endswith(tag[:k]):
            return text[:-k]
    return text


def iter_tagged_blocks(
    text: str, open_tag: str, close_tag: str, start: int
) -> list[tuple[str, bool]]:
    """Split ``text[start:]`` into the bodies of ``open_tag…close_tag`` blocks.

    Returns ``[(body, closed), ...]``; only the last block can be unclosed (truncated output).
    Text between blocks is ignored, as the former layer and vLLM do.
    """
    blocks: list[tuple[str, bool]] = []
    pos = start
    while True:
        i = text.find(open_tag, pos)
        if i < 0:
            return blocks
        body_start = i + len(open_tag)
        j = text.find(close_tag, body_start)
        if j < 0:
            blocks.append((strip_partial_suffix(text[body_start:], close_tag), False))
            return blocks
        blocks.append((text[body_start:j], True))
        pos = j + len(close_tag)
