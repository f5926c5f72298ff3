"""Scripts: ordered rules that map a conversation to a reply.

The scripted endpoint is a stand-in for a model, not a model. What it "generates" is whatever the
first matching :class:`Rule` of a :class:`Script` returns. Rules see a :class:`Conversation` (the
request, parsed once) and a seeded :class:`random.Random`, so a rule can vary its answer between
samples (temperature > 0) while staying reproducible.

Scripts are registered by name through :func:`register_script` (a decorator on a factory that
returns a :class:`Script`) and looked up with ``get_script`` (both in ``_registry``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

_JUDGE_WORDS = ("score", "grade", "rate ", "rating", "judge", "evaluate")


@dataclass(frozen=True)
class Reply:
    """What one sample of the stand-in says.

    ``tool_calls`` is a list of ``(name, arguments)``; ids are assigned by the endpoint.
    ``arguments`` is a dict (sent as JSON) or a string sent exactly as given, so a script can
    play a model that writes broken arguments. ``finish_reason`` None means: "tool_calls" if
    there are calls, else "stop" (or "length" if the reply is cut by ``max_tokens``).
    ``untruncated`` sends the whole reply even past ``max_tokens``, as a provider that ignores
    the limit would (the probes' 1 MB reply).
    """

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    untruncated: bool = False


@dataclass(frozen=True)
class Rule:
    """One rule: ``when(conv)`` decides if it applies, ``reply(conv, rng)`` answers."""

    name: str
    when: Callable[[Conversation], bool]
    reply: Callable[[Conversation, random.Random], Reply]


class Script:
    """An ordered list of rules; the first rule whose ``when`` is true answers.

    ``source`` is the file a script was read from (``load_script``), named when no rule matches.
    """

    def __init__(self, name: str, rules: Iterable[Rule], source: str | None = None) -> None:
        self.name = name
        self.rules: list[Rule] = list(rules)
        self.source = source

    def __repr__(self) -> str:
        return f"Script({self.name!r}, rules={[r.name for r in self.rules]})"

    def match(self, conv: Conversation) -> Rule | None:
        for rule in self.rules:
            if rule.when(conv):
                return rule
        return None


class NoRuleMatched(LookupError):
    """Raised when no rule of a script applies to a request (the endpoint answers 422)."""


@dataclass
class Conversation:
    """A request as a rule sees it: the chat messages plus the sampling parameters.

    For ``/v1/completions`` and ``/generate`` the prompt text is parsed back into messages when it
    is ChatML; otherwise it becomes one user message.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    path: str = "/v1/chat/completions"
    #: the sample index this reply is drawn for (``_sampling``: consecutive within a group), so
    #: a rule can give the samples of one group different shapes, not only different wording
    sample: int = 0

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.tools:
            fn = tool.get("function", tool) if isinstance(tool, dict) else {}
            if isinstance(fn, dict) and fn.get("name"):
                names.append(str(fn["name"]))
        return names

    @property
    def system_prompt(self) -> str | None:
        for msg in self.messages:
            if msg.get("role") == "system":
                return _text(msg.get("content"))
        return None

    @property
    def last_user_text(self) -> str:
        for msg in reversed(self.messages):
            if msg.get("role") == "user":
                return _text(msg.get("content"))
        return ""

    @property
    def first_user_text(self) -> str:
        for msg in self.messages:
            if msg.get("role") == "user":
                return _text(msg.get("content"))
        return ""

    @property
    def assistant_turn(self) -> int:
        """How many assistant messages came before this request (0 on the first turn)."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def tool_calls_made(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tool call the assistant made so far, in order, as ``(name, args)``."""
        calls = []
        for msg in self.messages:
            if msg.get("role") != "assistant":
                continue
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function", {}) if isinstance(tc, dict) else {}
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {"_raw": args}
                calls.append((str(fn.get("name", "")), args if isinstance(args, dict) else {}))
        return calls

    @property
    def tool_results(self) -> dict[str, str]:
        """Tool results so far, tool name → content (the latest result wins per name)."""
        id_to_name: dict[str, str] = {}
        for msg in self.messages:
            if msg.get("role") == "assistant":
                for tc in msg.get("tool_calls") or []:
                    if isinstance(tc, dict):
                        id_to_name[str(tc.get("id"))] = str(tc.get("function", {}).get("name"))
        results: dict[str, str] = {}
        for msg in self.messages:
            if msg.get("role") == "tool":
                name = msg.get("name") or id_to_name.get(str(msg.get("tool_call_id")), "tool")
                results[str(name)] = _text(msg.get("content"))
        return results

    @property
    def last_message(self) -> dict[str, Any]:
        return self.messages[-1] if self.messages else {}

    @property
    def temperature(self) -> float:
        value = self.params.get("temperature")
        return 1.0 if value is None else float(value)

    @property
    def n(self) -> int:
        return int(self.params.get("n") or 1)

    @property
    def max_tokens(self) -> int | None:
        value = self.params.get("max_tokens")
        return None if value is None else int(value)

    @property
    def model(self) -> str:
        return str(self.params.get("model") or "")

    @property
    def is_judge(self) -> bool:
        """True for a judge-style prompt: no tools, asks for a JSON score/grade."""
        if self.tools:
            return False
        text = f"{self.system_prompt or ''}\n{self.last_user_text}".lower()
        return "json" in text and any(word in text for word in _JUDGE_WORDS)


def _text(content: Any) -> str:
    """Message content as plain text (OpenAI content may be a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict)
        )
    return str(content)
