"""OpenAI wire shapes: ``/v1/chat/completions`` and ``/v1/completions``, plain and SSE-streamed.

Shapes follow what the openai SDK (3.x) parses and atroposlib's ``OpenAIServer`` reads: choices
with ``message.tool_calls`` (ids, ``type: function``, JSON-string arguments), ``finish_reason``,
``usage``; streaming as ``data: {chunk}\\n\\n`` … ``data: [DONE]\\n\\n`` with tool-call deltas
carrying ``index``/``id``/``name`` first and argument fragments after.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

from hermes_replay.scripted_endpoint import _tokens
from hermes_replay.scripted_endpoint._chatml import is_chatml, parse_chatml
from hermes_replay.scripted_endpoint._engine import Sample
from hermes_replay.scripted_endpoint._script import Conversation, _text

SYSTEM_FINGERPRINT = "hermes-replay-scripted"
_PARAM_NAMES = (
    "temperature", "n", "max_tokens", "model", "top_p", "stop", "seed", "tool_choice",
    "response_format",
)


def chat_conversation(body: dict[str, Any]) -> Conversation:
    params = {k: body.get(k) for k in _PARAM_NAMES}
    if body.get("max_completion_tokens") is not None and params["max_tokens"] is None:
        params["max_tokens"] = body["max_completion_tokens"]
    return Conversation(
        messages=list(body.get("messages") or []),
        tools=list(body.get("tools") or []),
        params=params,
        path="/v1/chat/completions",
    )


def text_conversation(prompt: str, params: dict[str, Any], path: str) -> Conversation:
    """A raw prompt as a conversation: parsed ChatML, or one user message."""
    if is_chatml(prompt):
        messages, tools = parse_chatml(prompt)
    else:
        messages, tools = [{"role": "user", "content": prompt}], []
    return Conversation(messages=messages, tools=tools, params=params, path=path)


def prompt_token_count(conv: Conversation) -> int:
    tok = _tokens.get_tokenizer()
    if tok is not None and getattr(tok, "chat_template", None):
        try:
            text = tok.apply_chat_template(
                conv.messages, tools=conv.tools or None, tokenize=False,
                add_generation_prompt=True,
            )
            return _tokens.count(str(text))
        except Exception:  # a stand-in must answer odd messages; fall back to plain text
            pass
    return sum(_tokens.count(_text(m.get("content"))) for m in conv.messages)


def response_id(prefix: str, samples: list[Sample]) -> str:
    seed = "|".join(f"{s.sample_index}:{s.key}" for s in samples)
    return f"{prefix}-{hashlib.sha256(seed.encode()).hexdigest()[:24]}"


def _usage(prompt_tokens: int, samples: list[Sample]) -> dict[str, int]:
    completion = sum(_tokens.count(s.raw_text) for s in samples)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }


def _token_logprobs(sample: Sample, sampler: Any, top: int) -> list[dict[str, Any]]:
    parts = _tokens.pieces(sample.raw_text)
    values = sampler.logprob_values(sample.key, sample.sample_index, len(parts))
    out = []
    for piece, lp in zip(parts, values, strict=True):
        entry = {"token": piece, "logprob": lp, "bytes": list(piece.encode())}
        out.append({**entry, "top_logprobs": [entry] if top else []})
    return out


def _message(sample: Sample) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": sample.content}
    if sample.tool_calls:
        msg["tool_calls"] = sample.tool_calls
    if sample.reasoning:
        # vLLM/DeepSeek call it reasoning_content, OpenRouter reasoning; clients read either.
        msg["reasoning_content"] = sample.reasoning
        msg["reasoning"] = sample.reasoning
    return msg


def chat_response(
    body: dict[str, Any], conv: Conversation, samples: list[Sample], sampler: Any
) -> dict[str, Any]:
    want_lp = bool(body.get("logprobs"))
    top = int(body.get("top_logprobs") or 0)
    choices = []
    for i, s in enumerate(samples):
        lp = {"content": _token_logprobs(s, sampler, top), "refusal": None} if want_lp else None
        choices.append(
            {"index": i, "message": _message(s), "logprobs": lp, "finish_reason": s.finish_reason}
        )
    return {
        "id": response_id("chatcmpl", samples),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": choices,
        "usage": _usage(prompt_token_count(conv), samples),
    }


def chat_stream(
    body: dict[str, Any], conv: Conversation, samples: list[Sample]
) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion (without the ``[DONE]`` sentinel)."""
    base = {
        "id": response_id("chatcmpl", samples),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {**base, "choices": [
            {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        ]}
        if include_usage:
            out["usage"] = None
        return out

    for i, s in enumerate(samples):
        yield chunk(i, {"role": "assistant", "content": ""})
        if s.reasoning:
            yield chunk(i, {"reasoning_content": s.reasoning})
        for piece in _tokens.pieces(s.content or ""):
            yield chunk(i, {"content": piece})
        for ci, call in enumerate(s.tool_calls):
            fn = call["function"]
            yield chunk(i, {"tool_calls": [{
                "index": ci, "id": call["id"], "type": "function",
                "function": {"name": fn["name"], "arguments": ""},
            }]})
            args = fn["arguments"]
            half = len(args) // 2  # two fragments, so clients must really accumulate
            for frag in (args[:half], args[half:]):
                if frag:
                    yield chunk(i, {"tool_calls": [{"index": ci, "function": {"arguments": frag}}]})
        yield chunk(i, {}, s.finish_reason)
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(prompt_token_count(conv), samples)}


def completion_response(
    body: dict[str, Any], prompts: list[str], per_prompt: list[list[Sample]], sampler: Any
) -> dict[str, Any]:
    want = body.get("logprobs")
    choices = []
    all_samples = [s for group in per_prompt for s in group]
    for s in all_samples:
        lp = None
        if want is not None and want is not False:
            parts = _tokens.pieces(s.raw_text)
            values = sampler.logprob_values(s.key, s.sample_index, len(parts))
            offsets, pos = [], 0
            for p in parts:
                offsets.append(pos)
                pos += len(p)
            lp = {
                "tokens": parts,
                "token_logprobs": values,
                "top_logprobs": (
                    [{p: v} for p, v in zip(parts, values, strict=True)] if want else None
                ),
                "text_offset": offsets,
            }
        choices.append(
            {"index": len(choices), "text": s.raw_text, "logprobs": lp,
             "finish_reason": "length" if s.finish_reason == "length" else "stop"}
        )
    prompt_tokens = sum(_tokens.count(p) for p in prompts)
    return {
        "id": response_id("cmpl", all_samples),
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model") or "scripted",
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": choices,
        "usage": _usage(prompt_tokens, all_samples),
    }


def completion_stream(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Stream a finished completion response as text chunks, one token piece each."""
    base = {k: response[k] for k in ("id", "object", "created", "model", "system_fingerprint")}
    for choice in response["choices"]:
        for piece in _tokens.pieces(choice["text"]):
            yield {**base, "choices": [
                {"index": choice["index"], "text": piece, "logprobs": None, "finish_reason": None}
            ]}
        yield {**base, "choices": [
            {"index": choice["index"], "text": "", "logprobs": None,
             "finish_reason": choice["finish_reason"]}
        ]}


def sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
