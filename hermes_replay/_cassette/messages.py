"""Conversations out of recorded interactions: assistant replies (JSON or SSE chunks), tool
calls, and the threads of a rollout (agent loop vs. judge calls). Used by ``ls`` and ``show``."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "assistant_from_response",
    "conversation",
    "conversations",
    "count_tool_calls",
    "count_turns",
    "text_of",
    "tool_calls_of",
]


def text_of(content: Any) -> str:
    """Message content as text (a list of parts keeps its text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or f"[{part.get('type', 'part')}]"))
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def assistant_from_response(response: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message of a chat response, from JSON or from SSE chunks."""
    body = response.get("body")
    if isinstance(body, dict):
        choices = body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            if isinstance(choices[0].get("message"), dict):
                return choices[0]["message"]
            if "text" in choices[0]:
                return {"role": "assistant", "content": choices[0]["text"]}
        return None
    chunks = response.get("chunks")
    if isinstance(chunks, list):
        return _assistant_from_chunks(chunks)
    return None


def _assistant_from_chunks(chunks: list[Any]) -> dict[str, Any] | None:
    content, reasoning = [], []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for line in str(chunk).splitlines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if not data or data == "[DONE]":
                continue
            try:
                event = json.loads(data)
            except ValueError:
                continue
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(tc.get("index", 0)), {
                        "id": None, "type": "function", "function": {"name": "", "arguments": ""}
                    })
                    slot["id"] = tc.get("id") or slot["id"]
                    fn = tc.get("function") or {}
                    slot["function"]["name"] += fn.get("name") or ""
                    slot["function"]["arguments"] += fn.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def tool_calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)]


def _key(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What identifies a message for prefix matching (SDK replies gain keys like ``refusal``)."""
    return [(m.get("role"), text_of(m.get("content")), m.get("tool_call_id")) for m in messages]


def conversations(record: Any) -> list[tuple[list[int], list[dict[str, Any]]]]:
    """The conversation threads of a rollout as ``(request indexes, messages)``.

    A request continues a thread when that thread's last request is a prefix of it; anything
    else (a judge call, a summarizer) starts a new thread. Each thread's messages are its last
    request plus the model's reply. The env's reported final messages, when present, stand in
    for the first thread (they include tool results after the last model call).
    """
    threads: list[tuple[list[int], list[tuple[Any, ...]], list[dict[str, Any]]]] = []
    for index, inter in enumerate(record.interactions):
        body = inter.request.get("body")
        if not (isinstance(body, dict) and isinstance(body.get("messages"), list)):
            continue
        msgs = [m for m in body["messages"] if isinstance(m, dict)]
        key = _key(msgs)
        reply = assistant_from_response(inter.response)
        full = [*msgs, reply] if reply else msgs
        for n, (indexes, last_key, _) in enumerate(threads):
            if len(key) > len(last_key) and key[: len(last_key)] == last_key:
                threads[n] = ([*indexes, index], key, full)
                break
        else:
            threads.append(([index], key, full))
    result = [(indexes, full) for indexes, _, full in threads]
    reported = (record.outcome or {}).get("messages")
    if isinstance(reported, list) and reported:
        first = [m for m in reported if isinstance(m, dict)]
        result = [(result[0][0] if result else [], first), *result[1:]]
    return result


def conversation(record: Any) -> list[dict[str, Any]]:
    """The rollout's main (first) conversation thread."""
    threads = conversations(record)
    return threads[0][1] if threads else []


def count_tool_calls(record: Any) -> int:
    """The tool calls the rollout's agent made: in its replies, or — for Phase 2, whose
    ``/generate`` replies are raw text only the env's parser reads — the agent tool calls
    recorded for it (each call that ran)."""
    found = sum(len(tool_calls_of(m)) for _, msgs in conversations(record) for m in msgs
                if m.get("role") == "assistant")
    if found or not any(i.kind == "generate" for i in record.interactions):
        return found
    return sum(1 for call in getattr(record, "tool_calls", None) or ()
               if getattr(call, "source", None) == "agent")


def count_turns(record: Any) -> int:
    turns = (record.outcome or {}).get("turns_used")
    return int(turns) if isinstance(turns, int) else len(record.interactions)
