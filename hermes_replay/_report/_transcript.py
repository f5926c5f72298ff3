"""A rollout's conversation as the page shows it: messages, tool calls, tool results.

The same threads ``show`` prints (``_cli._messages.conversations``: the agent loop, then any
other conversation such as a judge call), turned into small JSON entries. Texts go into a
shared string table (``Strings``): every rollout of a run repeats the system prompt and the
tool instructions, and at 1,000 rollouts storing them once is most of the page's size.

A tool result is an error by the agent loop's rule (``environments.tools.tool_result_error``,
restated here because ``hermes_replay`` never imports ``environments``): a JSON object with a
truthy ``"error"``, an integer ``"exit_code"`` other than 0, or ``"success": false``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_replay._cassette import RolloutRecord
from hermes_replay._cassette.messages import conversations, text_of, tool_calls_of
from hermes_replay._cassette.toolcalls import ToolCall

__all__ = ["Strings", "misses_by_rollout", "recorded_tool_calls", "tool_result_error",
           "transcript"]


class Strings:
    """Interned texts: each distinct string is stored once; entries refer to it by index."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str | None) -> int | None:
        if text is None or text == "":
            return None
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.values)
            self.values.append(text)
        return found


def tool_result_error(content: str) -> str | None:
    """Why a tool result reports an error, or None (the agent loop's rule, see above)."""
    stripped = content.strip()
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("error"):
        return str(data["error"])[:200]
    code = data.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    if data.get("success") is False:
        return "success: false"
    return None


def _message(msg: dict[str, Any], strings: Strings, names: dict[str, str]) -> dict[str, Any]:
    role = str(msg.get("role") or "?")
    entry: dict[str, Any] = {"role": role}
    text = text_of(msg.get("content"))
    if text:
        entry["text"] = strings.add(text)
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if reasoning:
        entry["reasoning"] = strings.add(text_of(reasoning))
    calls = []
    for call in tool_calls_of(msg):
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = str(fn.get("name") or "?")
        args = fn.get("arguments")
        if call.get("id"):
            names[str(call["id"])] = name
        calls.append({"id": str(call.get("id") or ""), "name": name,
                      "args": strings.add(args if isinstance(args, str)
                                          else json.dumps(args, ensure_ascii=False))})
    if calls:
        entry["calls"] = calls
    if role == "tool":
        call_id = str(msg.get("tool_call_id") or "")
        entry["tool"] = str(msg.get("name") or names.get(call_id) or "tool")
        error = tool_result_error(text)
        if error:
            entry["error"] = error
    return entry


def _threads(record: RolloutRecord, scored: list[dict[str, Any]] | None
             ) -> list[tuple[list[int], list[dict[str, Any]]]]:
    threads = conversations(record)
    if threads or not scored:
        return threads
    # token requests (Phase 2): the conversation is the one the env scored; its n-th reply
    # answered the n-th request
    replies = sum(1 for m in scored if isinstance(m, dict) and m.get("role") == "assistant")
    seqs = sorted(i.seq for i in record.interactions)
    return [(seqs if len(seqs) == replies else [], [m for m in scored if isinstance(m, dict)])]


def transcript(record: RolloutRecord, strings: Strings,
               scored: list[dict[str, Any]] | None = None
               ) -> tuple[list[dict[str, Any]], int, int]:
    """``(messages, tool calls, tool results that report an error)`` of one rollout.

    ``scored``: the messages the env scored (``groups.jsonl``), used when the recorded requests
    hold no messages (Phase 2 token requests). An assistant message carries ``turn``: the
    ``seq`` of the request it answered (0-based; the page shows turn ``seq + 1``, as every
    message of hermes-replay counts), so a miss or a divergence there can be shown on it.
    A message opening another conversation of the rollout (a judge call) carries ``thread``.
    """
    out: list[dict[str, Any]] = []
    calls = errors = 0
    names: dict[str, str] = {}
    for number, (indexes, msgs) in enumerate(_threads(record, scored)):
        assistant_turns = iter(indexes if len(indexes) == sum(
            1 for m in msgs if m.get("role") == "assistant") else [])
        for k, msg in enumerate(msgs):
            entry = _message(msg, strings, names)
            if k == 0 and number:
                entry["thread"] = number
            if entry["role"] == "assistant":
                turn = next(assistant_turns, None)
                if turn is not None:
                    entry["turn"] = turn
                calls += len(entry.get("calls", ()))
            errors += 1 if entry.get("error") else 0
            out.append(entry)
    if not out:  # token requests and no scored messages: each request's completion text
        for inter in sorted(record.interactions, key=lambda i: i.seq):
            body = inter.response.get("body")
            text = body.get("text") if isinstance(body, dict) else None
            text = text[0] if isinstance(text, list) and text else text
            out.append({"role": "assistant", "turn": inter.seq, "text": strings.add(
                text if isinstance(text, str) else
                f"{inter.request.get('method', 'POST')} {inter.request.get('path', '')} "
                f"({inter.kind}, status {inter.response.get('status')})")})
    return out, calls, errors


_MISS_WHERE = re.compile(r"rollout (?P<q>['\"])(?P<rid>.+?)(?P=q), turn (?P<turn>\d+)")
_REWARD_WHERE = re.compile(r"reward call \d+ of rollout (?P<q>['\"])(?P<rid>.+?)(?P=q)")


def misses_by_rollout(misses: list[str]) -> dict[str, list[dict[str, Any]]]:
    """A replay's misses (``Miss.describe`` texts) per rollout id: ``[{"seq", "text"}]``, where
    ``seq`` is the missed request's 0-based number (messages count turns from 1: turn = seq + 1).
    Misses outside any rollout are kept under ``""``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for text in misses:
        head = text.splitlines()[0] if text else ""
        match = _MISS_WHERE.search(head)
        reward = None if match else _REWARD_WHERE.search(head)  # a judge's: no agent turn
        rid = match.group("rid") if match else reward.group("rid") if reward else ""
        seq = int(match.group("turn")) - 1 if match else None
        found.setdefault(rid, []).append({"seq": seq, "text": text})
    return found


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=repr)


def recorded_tool_calls(calls: list[ToolCall], strings: Strings) -> list[dict[str, Any]]:
    """The tool calls the cassette recorded for a rollout (``hermes_replay.tool_call``): the
    agent's, and those ``compute_reward``/``evaluate`` made through ``ToolContext``, which no
    message shows. ``error``: it raised, exited non-zero, or reported an error."""
    out = []
    for call in sorted(calls, key=lambda c: c.seq):
        result = _as_text(call.result) if call.raised is None else _as_text(call.raised)
        error = None
        if call.raised is not None:
            error = f"raised {call.raised.get('type', 'an exception')}"
        elif call.exit_code not in (None, 0):
            error = f"exit code {call.exit_code}"
        else:
            error = tool_result_error(result)
        entry: dict[str, Any] = {"seq": call.seq, "turn": call.turn, "source": call.source,
                                 "name": call.name, "args": strings.add(_as_text(call.arguments)),
                                 "result": strings.add(result)}
        if error:
            entry["error"] = error
        if call.origin in ("rescored", "rerun"):
            entry["origin"] = call.origin
        out.append(entry)
    return out
