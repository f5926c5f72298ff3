"""The ``generic`` script: a sensible default for any tool-calling environment.

Order of rules (first match answers):

1. ``judge`` — a judge-style prompt (no tools, asks for a JSON score) gets
   ``{"score": x, "reason": "..."}``; the scale follows the prompt ("0-10"/"1-10"/"1-5", else 0..1).
2. ``first-tool-call`` — tools are offered and none has been called yet (or ``tool_choice`` is
   ``"required"`` or names a function; ``"none"`` disables it): call the named tool, else the one
   whose name and description best match the user's text, arguments filled from its JSON schema.
3. ``answer-from-tool-results`` — the last message is a tool result: a final answer quoting it.
4. ``plain-answer`` — anything else: an answer to a question the script knows nothing about.

Wording varies with the sample's ``rng`` (so a GRPO group at temperature > 0 sees different
samples) but is fixed for a given seed and sample index. A plain answer also varies its *shape*
within a group (by sample index): an environment the script knows nothing about rewards some
shape — a ``\boxed{}`` or ``#### N`` answer, ``<answer>`` tags, ``<think>`` reasoning, a short or a
long reply — and a group whose replies all scored the same is dropped by atroposlib's
identical-score filter; so sample 0 is the short echo, and samples 1, 2, … answer a guess (a
number computed from the question's numbers, an option letter, a word of it) in the common
formats in turn. ``generic_rules()`` returns the rules so
other scripts can put their own rules in front and keep these as the fallback.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from hermes_replay.scripted_endpoint._script import (
    Conversation,
    Reply,
    Rule,
    Script,
)

_OPENERS = (
    "Here is what I found.",
    "Done.",
    "I checked it.",
    "Result below.",
    "That worked.",
    "Okay.",
)
_CLOSERS = (
    "Let me know if you need more.",
    "That should answer it.",
    "Hope this helps.",
    "This is my final answer.",
    "Nothing else to do.",
    "All set.",
)
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function", tool)
    return fn if isinstance(fn, dict) else {}


def pick_tool(conv: Conversation, rng: random.Random) -> dict[str, Any] | None:
    """The offered tool sharing the most words with the user's text (ties broken by ``rng``)."""
    if not conv.tools:
        return None
    forced = conv.params.get("tool_choice")
    if isinstance(forced, dict):  # {"type": "function", "function": {"name": ...}}
        wanted = (forced.get("function") or {}).get("name")
        for tool in conv.tools:
            if _function(tool).get("name") == wanted:
                return tool
    asked = _words(conv.last_user_text or conv.first_user_text)

    def overlap(tool: dict[str, Any]) -> int:
        fn = _function(tool)
        name_words = set(str(fn.get("name", "")).lower().replace("_", " ").split())
        return 2 * len(asked & name_words) + len(asked & _words(str(fn.get("description", ""))))

    scores = [overlap(t) for t in conv.tools]
    best = max(scores)
    candidates = [t for t, s in zip(conv.tools, scores, strict=True) if s == best]
    return candidates[0] if len(candidates) == 1 else rng.choice(candidates)


def fill_arguments(schema: dict[str, Any], conv: Conversation) -> dict[str, Any]:
    """Arguments for a JSON-schema ``parameters`` object: every required property, plausibly."""
    props = schema.get("properties") or {}
    required = schema.get("required")
    names = list(required) if required else list(props)[:1]
    text = short_phrase(conv.last_user_text or "")
    return {name: _value_for(name, props.get(name) or {}, text) for name in names}


_SENTENCE_END = re.compile(r"(?<=[.?!])\s")
_PHRASE_WORDS = 12
_PHRASE_CHARS = 80


def short_phrase(text: str) -> str:
    """A search-box-sized piece of the user's text for a string argument: its first question
    (a sentence ending in '?'), else the first sentence of its first non-empty line; at most
    12 words / 80 characters, cut at a word.

    A long prompt (instructions, few-shot examples, a whole raw completion prompt) copied into
    ``query`` made every recorded tool call as long as the prompt, which no model does and
    which buried the call in diffs.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    sentences = [s.strip() for ln in lines for s in _SENTENCE_END.split(ln)]
    questions = [s for s in sentences if s.endswith("?")]
    sentence = questions[0] if questions else (
        _SENTENCE_END.split(lines[0], maxsplit=1)[0].strip() if lines else "")
    words = sentence.split()[:_PHRASE_WORDS]
    phrase = ""
    for word in words:
        candidate = f"{phrase} {word}".strip()
        if len(candidate) > _PHRASE_CHARS:
            break
        phrase = candidate
    return phrase or sentence[:_PHRASE_CHARS]


def _value_for(name: str, prop: dict[str, Any], text: str) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in ("integer", "number"):
        return prop.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    lowered = name.lower()
    if lowered in ("command", "cmd", "shell"):
        return "echo scripted"
    if lowered in ("code", "script", "source"):
        return "print('scripted')"
    if "path" in lowered or "file" in lowered:
        return "notes.txt"
    if "url" in lowered:
        return "https://example.com"
    return text or "scripted"


def _judge(conv: Conversation, rng: random.Random) -> Reply:
    prompt = f"{conv.system_prompt or ''}\n{conv.last_user_text}"
    scale = re.search(r"\b([01])\s*(?:-|to)\s*(5|10|100)\b", prompt)
    if scale:
        low, high = int(scale.group(1)), int(scale.group(2))
        score: float = rng.randint(max(low, high // 2), high)
    else:
        score = round(rng.uniform(0.5, 1.0), 2)
    reason = rng.choice(
        ("The answer addresses the question.", "Mostly correct.", "Clear and relevant.")
    )
    return Reply(content=json.dumps({"score": score, "reason": reason}))


def _first_tool_call(conv: Conversation, rng: random.Random) -> Reply:
    tool = pick_tool(conv, rng)
    assert tool is not None  # guarded by ``when``
    fn = _function(tool)
    args = fill_arguments(fn.get("parameters") or {}, conv)
    return Reply(tool_calls=[(str(fn.get("name")), args)])


def _answer_from_results(conv: Conversation, rng: random.Random) -> Reply:
    last = conv.last_message
    name = last.get("name") or next(reversed(conv.tool_results), "tool")
    result = conv.tool_results.get(name, str(last.get("content") or ""))
    quoted = result.strip().replace("\n", " ")[:300]
    return Reply(
        content=f"{rng.choice(_OPENERS)} The {name} tool returned: {quoted} {rng.choice(_CLOSERS)}"
    )


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPTION = re.compile(r"(?:^|\s|\()([A-E])[).:]\s")


def _guess(question: str, rng: random.Random) -> str:
    """A plausible answer to a question the script cannot read: an option letter when it
    offers some, else a number made from its numbers (their sum, difference, product, or one
    of them), else one of its longer words."""
    options = _OPTION.findall(question)
    if len(set(options)) >= 2:
        return rng.choice(sorted(set(options)))
    numbers = [float(x) for x in _NUMBER.findall(question)][:6]
    if numbers:
        a, b = (numbers[0], numbers[-1]) if len(numbers) > 1 else (numbers[0], 0.0)
        value = rng.choice([a + b, a - b, a * b, a, b, sum(numbers)])
        return str(int(value)) if float(value).is_integer() else f"{value:.2f}"
    words = [w for w in _WORD.findall(question.lower()) if len(w) > 3]
    return rng.choice(words) if words else "yes"


def _plain_answer(conv: Conversation, rng: random.Random) -> Reply:
    question = conv.last_user_text.strip().replace("\n", " ")[:200]
    opener, closer = rng.choice(_OPENERS), rng.choice(_CLOSERS)
    shape = conv.sample % 6
    if shape == 0:  # sample 0 (every single request) stays the short echo it always was
        return Reply(content=f"{opener} You asked: {question} {closer}")
    guess = _guess(question, rng)
    if shape == 1:
        return Reply(content=f"<think>Reading the question and working it out.</think>\n"
                             f"The answer is \\boxed{{{guess}}}. {closer}")
    if shape == 2:
        return Reply(content=f"Let me go step by step. First I restate: {question} Then I "
                             f"compute the result. {closer}\n#### {guess}")
    if shape == 3:
        return Reply(content=f"{opener} <answer>{guess}</answer> {closer}")
    if shape == 4:
        return Reply(content=json.dumps({"answer": guess, "confidence":
                                         round(rng.uniform(0.3, 0.9), 2)}))
    filler = " ".join(rng.choice(("I", "think", "the", "question", "asks", "about", "this",
                                  "and", "so", "it", "depends", "on", "details"))
                      for _ in range(40))
    return Reply(content=f"{opener} {filler}. Perhaps {guess}. {closer}")


def _should_call_tool(conv: Conversation) -> bool:
    choice = conv.params.get("tool_choice")
    if not conv.tools or choice == "none":
        return False
    return not conv.tool_calls_made or choice == "required" or isinstance(choice, dict)


def generic_rules() -> list[Rule]:
    return [
        Rule("judge", lambda c: c.is_judge, _judge),
        Rule("first-tool-call", _should_call_tool, _first_tool_call),
        Rule("answer-from-tool-results", lambda c: c.last_message.get("role") == "tool",
             _answer_from_results),
        Rule("plain-answer", lambda c: True, _plain_answer),
    ]


def generic() -> Script:
    return Script("generic", generic_rules())
