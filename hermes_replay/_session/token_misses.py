"""A miss on a token path, read as text: the decoded prompts' diff above the token ids'.

A request to vLLM/SGLang ``/generate`` or ``/v1/completions`` with token ids carries its prompt
as ids: a one-character change of the prompt reads as six ``prompt_token_ids[105]: 2 → 16``
fields. The cassette names the tokenizer it was recorded with, so both sides are decoded with
it and the miss shows where the texts differ (each changed span with some context), then the
field diff of the ids under it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

__all__ = ["prompt_ids", "text_diff_lines"]

_CONTEXT = 40  # characters of unchanged text shown around a change
_HUNKS = 3
_SPAN = 200  # characters of one changed span shown at most
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def _ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    if isinstance(value, list) and len(value) == 1:  # a batch of one prompt
        return _ids(value[0])
    return None


def prompt_ids(request: dict[str, Any]) -> list[int] | None:
    """The token ids of a token-path request's prompt (vLLM's ``prompt.prompt_token_ids``,
    SGLang's ``input_ids``, a completions ``prompt`` of ids), or None."""
    body = request.get("body")
    if not isinstance(body, dict):
        return None
    prompt = body.get("prompt")
    if isinstance(prompt, dict):
        found = _ids(prompt.get("prompt_token_ids"))
        if found is not None:
            return found
    return _ids(prompt) if prompt is not None else _ids(body.get("input_ids"))


def _shown(text: str, limit: int = _SPAN) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit // 2] + "…" + text[-limit // 2:]


def text_diff_lines(recorded: dict[str, Any], request: dict[str, Any],
                    decode: Callable[[list[int]], str] | None) -> list[str]:
    """The decoded prompts' differences as ``-``/``+`` lines (with a title), or [] when either
    side has no token prompt, no tokenizer is at hand, or the texts are the same."""
    old_ids, new_ids = prompt_ids(recorded), prompt_ids(request)
    if old_ids is None or new_ids is None or decode is None:
        return []
    try:
        old, new = decode(old_ids), decode(new_ids)
    except Exception:  # ids the tokenizer does not know: the token diff says it all
        return []
    if old == new:
        return []
    lines = [f"prompt text (decoded with the cassette's tokenizer; {len(old_ids)} → "
             f"{len(new_ids)} tokens):"]
    # compared word by word (a character diff of "string" → "word" reads as "st" → "wo")
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    hunks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
             if op[0] != "equal"]
    for _tag, i1, i2, j1, j2 in hunks[:_HUNKS]:  # wdiff style: [-recorded-] {+request+}
        start, end = len("".join(a[:i1])), len("".join(a[:i2]))
        lead = ("…" if start > _CONTEXT else "") + _shown(old[max(0, start - _CONTEXT):start])
        tail = _shown(old[end:end + _CONTEXT]) + ("…" if end + _CONTEXT < len(old) else "")
        lines.append(f"  -{lead}[-{_shown(''.join(a[i1:i2]))}-]{tail}")
        lines.append(f"  +{lead}{{+{_shown(''.join(b[j1:j2]))}+}}{tail}")
    if len(hunks) > _HUNKS:
        lines.append(f"  … and {len(hunks) - _HUNKS} more change(s) in the text")
    lines.append("token ids:")
    return lines
