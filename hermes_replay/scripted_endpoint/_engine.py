"""Turns one request into ``n`` samples: pick sample indices, run the script, finish each reply.

Shared by every route (chat, completions, vLLM and SGLang ``/generate``) so they agree on what
"sample j of this request" says. The HTTP shapes live in ``_openai.py`` and ``_generate.py``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from hermes_replay.scripted_endpoint import _tokens
from hermes_replay.scripted_endpoint._chatml import render_reply
from hermes_replay.scripted_endpoint._sampling import Sampler, canonical_key, is_greedy
from hermes_replay.scripted_endpoint._script import Conversation, NoRuleMatched, Script


@dataclass
class Sample:
    """One finished answer of the stand-in (one choice of a response)."""

    sample_index: int
    rule: str
    content: str | None
    tool_calls: list[dict[str, Any]]  # OpenAI shape, with ids
    reasoning: str | None
    finish_reason: str  # "stop" | "tool_calls" | "length" (or what the rule set)
    raw_text: str  # the whole reply as raw model text (reasoning + content + calls in the format)
    key: str = field(repr=False, default="")


class Engine:
    def __init__(self, script: Script, sampler: Sampler, raw_tool_format: str) -> None:
        self.script = script
        self.sampler = sampler
        self.raw_tool_format = raw_tool_format

    def run(self, path: str, body: dict[str, Any], conv: Conversation, n: int) -> list[Sample]:
        key = canonical_key(path, body)
        greedy = is_greedy(conv.params.get("temperature"))
        rule = self.script.match(conv)
        if rule is None:
            where = self.script.source
            fix = (f"add a rule for it to {where} or set fallback = \"generic\" there"
                   if where else
                   "add a rule for it or end the script with a catch-all rule "
                   "(see scripts/generic.py)")
            raise NoRuleMatched(
                f"scripted endpoint: no rule of script {self.script.name!r} matched this "
                f"{path} request{unread_roles(conv)} (last message: "
                f"{conv.last_message!r:.200}); {fix}"
            )
        samples = []
        for j in self.sampler.indices(key, n, greedy):
            reply = rule.reply(replace(conv, sample=j), self.sampler.content_rng(key, j))
            samples.append(self._finish(key, j, rule.name, reply, conv.max_tokens))
        return samples

    def _finish(self, key: str, j: int, rule: str, reply: Any, max_tokens: int | None) -> Sample:
        calls = [
            {
                "id": _call_id(self.sampler.seed, key, j, i),
                "type": "function",
                "function": {"name": name, "arguments": _arguments(args)},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        # Raw-text formats render argument objects; broken (string) arguments stay as written.
        renderable = [(name, args if isinstance(args, dict) else {"_raw": args})
                      for name, args in reply.tool_calls]
        visible = render_reply(reply.content, renderable, None, self.raw_tool_format)
        if getattr(reply, "untruncated", False):
            cut, truncated = visible, False
        else:
            cut, truncated = _tokens.truncate(visible, max_tokens)
        content = reply.content
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        if truncated:
            # A real model cut mid-reply leaves raw text with no parseable calls.
            content, calls, finish = cut, [], "length"
        prefix = f"<think>{reply.reasoning}</think>\n" if reply.reasoning else ""
        return Sample(
            sample_index=j,
            rule=rule,
            content=content,
            tool_calls=calls,
            reasoning=reply.reasoning,
            finish_reason=finish,
            raw_text=prefix + (cut if truncated else visible),
            key=key,
        )


#: the chat roles a rule reads (``Conversation``: system prompt, user text, tool results)
KNOWN_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def unread_roles(conv: Conversation) -> str:
    """Why the rules may have seen nothing: messages whose role no rule reads (an env that
    sends ``human``/``gpt`` leaves the user text every rule matches on empty)."""
    odd = [(i, m.get("role")) for i, m in enumerate(conv.messages)
           if isinstance(m, dict) and m.get("role") not in KNOWN_ROLES]
    if not odd:
        return ""
    shown = ", ".join(f"message {i} has role {role!r}" for i, role in odd[:4])
    return (f": {shown}, which no rule reads (rules read the roles "
            f"{', '.join(KNOWN_ROLES)}; the user text they match on is "
            f"{'empty' if not conv.last_user_text else repr(conv.last_user_text[:80])})")


def _arguments(args: Any) -> str:
    """Tool-call arguments as sent: dicts as JSON, strings verbatim (possibly broken)."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _call_id(seed: int, key: str, sample: int, call: int) -> str:
    digest = hashlib.sha256(f"{seed}\0call\0{sample}\0{call}\0{key}".encode()).hexdigest()
    return "call_" + digest[:24]
