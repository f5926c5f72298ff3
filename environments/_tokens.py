"""Phase 1 training tokens: token ids and loss masks rendered from the chat template.

An OpenAI-style endpoint returns text, not token ids, so the trainer-side tokens of a rollout are
re-created from the conversation with the tokenizer's chat template. The rule is simple and strict:
every token the *model* produced (assistant output, including its end-of-turn token) keeps its id in
``masks``; everything else — system, user, tool results, the template's role headers and the
generation prompt — is ``-100``.

How: the conversation is rendered once per assistant turn boundary. For assistant message ``i`` the
text ``render(messages[:i], add_generation_prompt=True)`` is the context the model saw and
``render(messages[:i + 1])`` ends where its output ended; the characters in between are the model's
output. Each piece of text is encoded separately (no special tokens added), so no token straddles a
prompt/output boundary — the same split the model saw when it generated. Trailing whitespace that
the template adds after the end-of-turn token is not model output and stays masked.

If the template is not prefix-consistent (a render of a shorter conversation is not a prefix of the
longer one, e.g. templates that drop earlier reasoning), we fall back to masking only the last
assistant turn, which is always well defined, and say so in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from environments._chunked import encode_ids

logger = logging.getLogger(__name__)

MASK = -100
_TRAINED_ROLES = ("assistant",)


class TemplateMismatch(ValueError):
    """The chat template does not render conversations as prefixes of each other."""


@dataclass(frozen=True)
class Segment:
    text: str
    trained: bool


def _render(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: list[dict] | None,
            *, generation_prompt: bool) -> str:
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": generation_prompt}
    if tools:
        kwargs["tools"] = tools
    text = tokenizer.apply_chat_template(list(messages), **kwargs)
    if not isinstance(text, str):  # transformers 5 may hand back a BatchEncoding; refuse quietly
        raise TypeError(
            f"apply_chat_template(tokenize=False) returned {type(text).__name__}, expected str; "
            "pin transformers<5 (see DESIGN 5)"
        )
    return text


def split_segments(tokenizer: Any, messages: Sequence[dict[str, Any]],
                   tools: list[dict] | None = None) -> list[Segment]:
    """The rendered conversation cut into (text, trained?) pieces; see the module docstring."""
    full = _render(tokenizer, messages, tools, generation_prompt=False)
    segments: list[Segment] = []
    cursor = 0
    for i, msg in enumerate(messages):
        if msg.get("role") not in _TRAINED_ROLES:
            continue
        before = _render(tokenizer, messages[:i], tools, generation_prompt=True) if i else ""
        through = _render(tokenizer, messages[: i + 1], tools, generation_prompt=False)
        if not (full.startswith(through) and through.startswith(before)) or len(before) < cursor:
            raise TemplateMismatch(f"chat template is not prefix-consistent at message {i}")
        end = len(through.rstrip())  # whitespace after the end-of-turn token is template glue
        if end <= len(before):
            continue  # an empty assistant message: nothing was generated
        if len(before) > cursor:
            segments.append(Segment(full[cursor:len(before)], False))
        segments.append(Segment(full[len(before):end], True))
        cursor = end
    if cursor < len(full):
        segments.append(Segment(full[cursor:], False))
    return segments


def _encode(tokenizer: Any, text: str) -> list[int]:
    # In bounded pieces with the same ids as one call (see _chunked): a multi-megabyte reply
    # encoded in one call costs ~150 bytes of tokenizer state per character.
    return encode_ids(tokenizer, text)


def _last_turn_only(tokenizer: Any, messages: Sequence[dict[str, Any]],
                    tools: list[dict] | None) -> list[Segment]:
    last = max(i for i, m in enumerate(messages) if m.get("role") in _TRAINED_ROLES)
    before = _render(tokenizer, messages[:last], tools, generation_prompt=True)
    through = _render(tokenizer, messages[: last + 1], tools, generation_prompt=False)
    if not through.startswith(before):
        logger.error("chat template rewrites even the last turn's context; nothing to train on "
                     "in this rollout (check the tokenizer's chat template)")
        return [Segment(through, False)]
    out = through[len(before):]
    end = len(out.rstrip())
    return [s for s in (Segment(before, False), Segment(out[:end], True),
                        Segment(out[end:], False)) if s.text]


def tokens_and_masks(tokenizer: Any, messages: Sequence[dict[str, Any]],
                     tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """``(tokens, masks)`` for one conversation; masks are ``-100`` except on assistant output."""
    if not any(m.get("role") in _TRAINED_ROLES for m in messages):
        tokens = _encode(tokenizer, _render(tokenizer, messages, tools, generation_prompt=False))
        return tokens, [MASK] * len(tokens)
    try:
        segments = split_segments(tokenizer, messages, tools)
    except TemplateMismatch as exc:
        logger.warning("%s; training on the last assistant turn only", exc)
        segments = _last_turn_only(tokenizer, messages, tools)
    tokens: list[int] = []
    masks: list[int] = []
    for seg in segments:
        ids = _encode(tokenizer, seg.text)
        tokens.extend(ids)
        masks.extend(ids if seg.trained else [MASK] * len(ids))
    return tokens, masks
