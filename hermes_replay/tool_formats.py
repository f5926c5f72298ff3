"""Tool calls written as raw model text, one renderer per format (public).

Two places need to write a tool call the way a model of a given family would: the scripted
endpoint (``hermes_replay.scripted_endpoint``, which plays the model in tests and probes) and
the tool-call parsers of ``environments.tool_call_parsers`` (whose ``render`` is the inverse of
``parse``). Both use these functions, so a scripted reply is byte for byte what the parser
reads back. The markers are here too; the parsers import them rather than spell them again.

``render(fmt, content, calls)`` takes a parser name (``hermes``, ``qwen``, ``longcat``,
``mistral``, ``llama3_json``, ``llama4_json``, ``deepseek_v3``, ``deepseek_v3_1``/``deepseek_v31``,
``kimi_k2``, ``glm45``, ``glm47``, ``qwen3_coder``) and ``calls`` as ``[(name, args), …]``.
With no calls the result is ``content or ""``. Deterministic: same input, same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["FORMATS", "dumps_args", "render"]

Calls = list[tuple[str, dict[str, Any]]]

# hermes / qwen / longcat / qwen3_coder wrap
HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
LONGCAT_OPEN, LONGCAT_CLOSE = "<longcat_tool_call>", "</longcat_tool_call>"
# mistral
MISTRAL_MARKER = "[TOOL_CALLS]"
# llama 3 / 4 json
PYTHON_TAG = "<|python_tag|>"
# deepseek v3 / v3.1
DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
DS_CALL_END = "<｜tool▁call▁end｜>"
DS_SEP = "<｜tool▁sep｜>"
# kimi k2
KIMI_SECTION_BEGINS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
KIMI_SECTION_END = "<|tool_calls_section_end|>"
KIMI_CALL_BEGIN = "<|tool_call_begin|>"
KIMI_CALL_END = "<|tool_call_end|>"
KIMI_ARG_BEGIN = "<|tool_call_argument_begin|>"
# qwen3 coder
QC_FUNC_OPEN, QC_FUNC_CLOSE = "<function=", "</function>"
QC_PARAM_OPEN, QC_PARAM_CLOSE = "<parameter=", "</parameter>"


def dumps_args(args: dict[str, Any]) -> str:
    """Serialise arguments the one way every format (and every parser) uses."""
    return json.dumps(args, ensure_ascii=False)


def plain_value(value: Any) -> str:
    """A value in the formats that write strings unquoted (glm, qwen3_coder)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _joined(content: str | None, blocks: list[str]) -> str:
    """``content`` then each block, one per line (the tag formats)."""
    out = content or ""
    for i, block in enumerate(blocks):
        if i or out:
            out += "\n"
        out += block
    return out


def render_hermes(content: str | None, calls: Calls, *, open_tag: str = HERMES_OPEN,
                  close_tag: str = HERMES_CLOSE) -> str:
    # byte-identical to the bundled tokenizer's chat template (hermes_replay/_tokenizers/bundled.py)
    return _joined(content, [
        f'{open_tag}\n{{"name": {json.dumps(name, ensure_ascii=False)}, '
        f'"arguments": {dumps_args(args)}}}\n{close_tag}' for name, args in calls])


def render_longcat(content: str | None, calls: Calls) -> str:
    return render_hermes(content, calls, open_tag=LONGCAT_OPEN, close_tag=LONGCAT_CLOSE)


def render_mistral(content: str | None, calls: Calls, *, v11: bool = True) -> str:
    out = content or ""
    if not calls:
        return out
    if v11:
        return out + "".join(f"{MISTRAL_MARKER}{name}{dumps_args(args)}" for name, args in calls)
    items = ", ".join(
        f'{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {dumps_args(args)}}}'
        for name, args in calls)
    return f"{out}{MISTRAL_MARKER} [{items}]"


def render_llama_json(content: str | None, calls: Calls) -> str:
    body = "; ".join(
        f'{{"name": {json.dumps(name, ensure_ascii=False)}, "parameters": {dumps_args(args)}}}'
        for name, args in calls)
    if content and body:
        return f"{content}\n{body}"
    return content or body


def render_deepseek(content: str | None, calls: Calls, *, typed: bool = True) -> str:
    out = content or ""
    if not calls:
        return out
    if typed:  # v3: "function" + name, then a fenced json block
        rendered = [f"{DS_CALL_BEGIN}function{DS_SEP}{name}\n```json\n{dumps_args(args)}\n```"
                    f"{DS_CALL_END}" for name, args in calls]
        return f"{out}{DS_CALLS_BEGIN}{chr(10).join(rendered)}{DS_CALLS_END}"
    rendered = [f"{DS_CALL_BEGIN}{name}{DS_SEP}{dumps_args(args)}{DS_CALL_END}"
                for name, args in calls]
    return f"{out}{DS_CALLS_BEGIN}{''.join(rendered)}{DS_CALLS_END}"


def render_kimi_k2(content: str | None, calls: Calls) -> str:
    out = content or ""
    if not calls:
        return out
    body = "".join(f"{KIMI_CALL_BEGIN}functions.{name}:{i}{KIMI_ARG_BEGIN}{dumps_args(args)}"
                   f"{KIMI_CALL_END}" for i, (name, args) in enumerate(calls))
    return f"{out}{KIMI_SECTION_BEGINS[0]}{body}{KIMI_SECTION_END}"


def render_glm(content: str | None, calls: Calls, *, newline: str = "\n") -> str:
    """glm45 writes a newline between name, keys and values; glm47 (``newline=""``) none."""
    blocks = []
    for name, args in calls:
        pairs = "".join(f"<arg_key>{k}</arg_key>{newline}<arg_value>{plain_value(v)}"
                        f"</arg_value>{newline}" for k, v in args.items())
        blocks.append(f"{HERMES_OPEN}{name}{newline}{pairs}{HERMES_CLOSE}")
    return _joined(content, blocks)


def render_qwen3_coder(content: str | None, calls: Calls) -> str:
    blocks = []
    for name, args in calls:
        params = "".join(f"{QC_PARAM_OPEN}{k}>\n{plain_value(v)}\n{QC_PARAM_CLOSE}\n"
                         for k, v in args.items())
        blocks.append(f"{HERMES_OPEN}\n{QC_FUNC_OPEN}{name}>\n{params}{QC_FUNC_CLOSE}\n"
                      f"{HERMES_CLOSE}")
    return _joined(content, blocks)


FORMATS: dict[str, Callable[[str | None, Calls], str]] = {
    "hermes": render_hermes,
    "qwen": render_hermes,
    "longcat": render_longcat,
    "mistral": render_mistral,
    "llama3_json": render_llama_json,
    "llama4_json": render_llama_json,
    "deepseek_v3": render_deepseek,
    "deepseek_v3_1": lambda content, calls: render_deepseek(content, calls, typed=False),
    "deepseek_v31": lambda content, calls: render_deepseek(content, calls, typed=False),
    "kimi_k2": render_kimi_k2,
    "glm45": render_glm,
    "glm47": lambda content, calls: render_glm(content, calls, newline=""),
    "qwen3_coder": render_qwen3_coder,
}


def render(fmt: str, content: str | None, calls: Calls) -> str:
    """``content`` followed by ``calls`` as format ``fmt`` writes them (see the module doc)."""
    try:
        renderer = FORMATS[fmt]
    except KeyError:
        raise KeyError(f"no renderer for tool-call format {fmt!r}; available: "
                       f"{', '.join(sorted(FORMATS))}") from None
    return renderer(content, calls)
