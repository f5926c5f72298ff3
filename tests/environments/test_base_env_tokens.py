"""Phase 1 token/mask construction and the Phase 2 translator, as units."""

from __future__ import annotations

from typing import Any

from environments._managed import ParserTranslator
from environments._tokens import MASK, tokens_and_masks
from hermes_replay._tokenizers.bundled import load_tokenizer

TOOLS = [{"type": "function", "function": {
    "name": "terminal", "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "notes.txt"},
    {"role": "assistant", "content": "There is one file: notes.txt."},
]


def test_masks_cover_exactly_the_assistant_turns():
    tok = load_tokenizer()
    tokens, masks = tokens_and_masks(tok, CHAT, TOOLS)
    assert tok.decode(tokens) == tok.apply_chat_template(CHAT, tools=TOOLS, tokenize=False)
    trained = tok.decode([t for t, m in zip(tokens, masks, strict=True) if m != MASK])
    assert trained == ('<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n'
                       "</tool_call><|im_end|>There is one file: notes.txt.<|im_end|>")
    # the trailing newline after the last <|im_end|> is template glue, not model output
    assert masks[-1] == MASK


def test_a_conversation_without_assistant_output_is_all_masked():
    tok = load_tokenizer()
    tokens, masks = tokens_and_masks(tok, CHAT[:2])
    assert tokens and set(masks) == {MASK}


class _ForgetfulTemplate:
    """Rewrites earlier assistant turns when later ones follow (like templates that drop old
    reasoning), so a shorter render is not a prefix of a longer one."""

    def __init__(self) -> None:
        self.inner = load_tokenizer()

    def apply_chat_template(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        last = len(messages) - 1
        shown = [dict(m, content=(m.get("content") or "").replace("(thinking) ", ""))
                 if m["role"] == "assistant" and i != last else m
                 for i, m in enumerate(messages)]
        return self.inner.apply_chat_template(shown, **kwargs)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.inner.encode(text, add_special_tokens=add_special_tokens)


def test_non_prefix_template_falls_back_to_the_last_turn(caplog):
    tok = _ForgetfulTemplate()
    chat = [dict(m) for m in CHAT]
    chat[2]["content"] = "(thinking) Let me check."
    tokens, masks = tokens_and_masks(tok, chat, TOOLS)
    trained = tok.inner.decode([t for t, m in zip(tokens, masks, strict=True) if m != MASK])
    assert trained == "There is one file: notes.txt.<|im_end|>"
    assert "last assistant turn only" in caplog.text


def test_translator_replays_the_exact_raw_text_and_renders_unknown_calls():
    translator = ParserTranslator("hermes", end_tokens=("<|im_end|>",))
    raw = 'Let me look.\n<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n' \
          "</tool_call><|im_end|>"
    content, calls, finish = translator.parse_model_output(raw, "auto", TOOLS)
    assert content == "Let me look." and finish == "tool_calls"
    assert calls[0].function.name == "terminal"
    message = {"role": "assistant", "content": content, "tool_calls": [
        {"id": calls[0].id, "type": "function",
         "function": {"name": "terminal", "arguments": calls[0].function.arguments}}]}
    converted = translator.convert_messages_for_template([{"role": "user", "content": "hi"},
                                                          message])
    assert converted[1] == {"role": "assistant", "content": raw.removesuffix("<|im_end|>")}
    seeded = dict(message, tool_calls=[dict(message["tool_calls"][0], id="unknown")])
    rendered = translator.convert_messages_for_template([seeded])[0]["content"]
    assert translator.parser.parse(rendered)[1][0].function.name == "terminal"
    assert translator.parse_model_output("plain answer<|im_end|>", "auto", TOOLS) == (
        "plain answer", None, "stop")
