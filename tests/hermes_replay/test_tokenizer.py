"""The shipped tokenizer: deterministic rebuild, offline loading, chat template, trainer masks.

The last group guards against transformers 5: atroposlib's ``tokenize_for_trainer`` must give a flat
list of token ids and masks that are -100 everywhere except on assistant output. Under
transformers 5 ``apply_chat_template`` returns a ``BatchEncoding`` and that function silently
produces garbage; these tests fail if that behaviour comes back (see
``test_guard_detects_transformers5_style_batch_encoding``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import tokenizers
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, BatchEncoding, PreTrainedTokenizerFast

from hermes_replay._tokenizers.bundled import (
    MARKUP_TOKENS,
    SPECIAL_TOKENS,
    TOKENIZER_FILES,
    TOKENIZER_NAME,
    build_tokenizer,
    load_tokenizer,
    tokenizer_fingerprint,
    tokenizer_path,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

EXAMPLE = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I should call the weather tool.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "clear"}'},
    {"role": "assistant", "content": "It is 18 °C and clear in Paris."},
]

EXPECTED_EXAMPLE = (
    "<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '[{"type": "function", "function": {"name": "get_weather", "description": '
    '"Current weather for a city.", "parameters": {"type": "object", "properties": '
    '{"city": {"type": "string"}}, "required": ["city"]}}}]\n</tools>\n\n'
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nI should call the weather tool.\n</think>\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    "<|im_end|>\n"
    "<|im_start|>tool\n<tool_response>\n"
    '{"temp_c": 18, "sky": "clear"}\n</tool_response><|im_end|>\n'
    "<|im_start|>assistant\nIt is 18 °C and clear in Paris.<|im_end|>\n"
    "<|im_start|>assistant\n"
)

# A longer agent conversation for the trainer-mask guard: several assistant turns, one with
# text plus a tool call (dict arguments), one with a JSON-string tool call, tool results between.
AGENT_CHAT = [
    {"role": "system", "content": "You are a careful agent. Use tools when needed."},
    {"role": "user", "content": "Read notes.txt and tell me how many lines it has."},
    {
        "role": "assistant",
        "content": "Let me read the file first.",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "read_file", "arguments": {"path": "notes.txt"}},
            }
        ],
    },
    {"role": "tool", "content": "alpha\nbeta\ngamma"},
    {"role": "assistant", "content": "The file has 3 lines."},
    {"role": "user", "content": "Now count the words with the terminal."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"function": {"name": "terminal", "arguments": '{"command": "wc -w notes.txt"}'}}
        ],
    },
    {"role": "tool", "content": "3 notes.txt"},
    {"role": "assistant", "content": "There are 3 words in notes.txt."},
]


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return load_tokenizer()


# --- build, files, loading -------------------------------------------------------------------


def test_rebuild_is_byte_identical_to_committed_files(tmp_path: Path) -> None:
    build_tokenizer(tmp_path)
    shipped = Path(tokenizer_path())
    # The fingerprint covers every shipped file: nothing else may sit in the directory.
    assert sorted(p.name for p in shipped.iterdir()) == sorted(TOKENIZER_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(TOKENIZER_FILES)
    for name in TOKENIZER_FILES:
        assert (tmp_path / name).read_bytes() == (shipped / name).read_bytes(), (
            f"{name} differs from a fresh build with tokenizers {tokenizers.__version__}; if the"
            " corpus or template changed on purpose, run `python scripts/build_tokenizer.py` and"
            " commit hermes_replay/assets/tokenizer/"
        )
    assert tokenizer_fingerprint(tmp_path) == tokenizer_fingerprint()


def test_fingerprint_tracks_content_not_location(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tokenizer_path(), copy)
    fp = tokenizer_fingerprint()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", fp)
    assert tokenizer_fingerprint(copy) == fp
    config = copy / "tokenizer_config.json"
    config.write_bytes(config.read_bytes().replace(b"32768", b"32769"))
    assert tokenizer_fingerprint(copy) != fp
    (copy / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"build_tokenizer\.py"):
        tokenizer_fingerprint(copy)


def test_tokenizer_path_is_inside_the_installed_package() -> None:
    import hermes_replay

    path = Path(tokenizer_path())
    assert path.is_absolute() and path.is_dir()
    assert path.is_relative_to(Path(hermes_replay.__file__).resolve().parent)


def test_autotokenizer_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    loaded = AutoTokenizer.from_pretrained(tokenizer_path())
    assert isinstance(loaded, PreTrainedTokenizerFast)
    assert loaded.name_or_path == tokenizer_path()
    assert loaded.eos_token == "<|im_end|>" and loaded.pad_token == "<|endoftext|>"
    assert loaded.bos_token is None
    assert 4000 <= len(loaded) <= 8000
    assert loaded.chat_template and "<tool_call>" in loaded.chat_template
    assert json.loads((Path(tokenizer_path()) / "tokenizer_config.json").read_text())[
        "name_or_path"
    ] == TOKENIZER_NAME


def test_load_tokenizer_is_cached() -> None:
    assert load_tokenizer() is load_tokenizer()


# --- encoding ----------------------------------------------------------------------------------


def test_markup_tokens_are_atomic_and_round_trip(tok: PreTrainedTokenizerFast) -> None:
    text = (
        "<|im_start|>assistant\n<think>\nCheck the file.\n</think>\n\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "/tmp/a b.txt", "n": 42}}\n'
        "</tool_call><|im_end|>\n<|im_start|>tool\n<tool_response>\nok ✓\n</tool_response>"
        "<|im_end|><|endoftext|>"
    )
    ids = tok.encode(text, add_special_tokens=False)
    assert all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == text
    for marker in (*SPECIAL_TOKENS, *MARKUP_TOKENS[:6]):
        if marker in text:
            assert tok.convert_tokens_to_ids(marker) in ids, marker
    # Special tokens vanish with skip_special_tokens; tool-call markup must survive for parsers.
    plain = tok.decode(ids, skip_special_tokens=True)
    assert "<|im_start|>" not in plain and "<|im_end|>" not in plain
    assert "<tool_call>" in plain and "</tool_response>" in plain and "<think>" in plain


# --- chat template -----------------------------------------------------------------------------


def test_template_renders_example_exactly(tok: PreTrainedTokenizerFast) -> None:
    text = tok.apply_chat_template(
        EXAMPLE, tools=[WEATHER_TOOL], tokenize=False, add_generation_prompt=True
    )
    assert text == EXPECTED_EXAMPLE
    ids = tok.apply_chat_template(EXAMPLE, tools=[WEATHER_TOOL], add_generation_prompt=True)
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    assert ids == tok.encode(EXPECTED_EXAMPLE, add_special_tokens=False)


def test_template_without_tools_or_system(tok: PreTrainedTokenizerFast) -> None:
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    text = tok.apply_chat_template(chat, tokenize=False)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
    # Tools without a system message still get a system block listing them.
    text = tok.apply_chat_template(chat[:1], tools=[WEATHER_TOOL, WEATHER_TOOL], tokenize=False)
    assert text.startswith("<|im_start|>system\n# Tools\n")
    tools_json = re.search(r"<tools>\n(.*?)\n</tools>", text, re.S).group(1)
    assert json.loads(tools_json) == [WEATHER_TOOL, WEATHER_TOOL]


def test_tool_call_arguments_render_as_json_objects(tok: PreTrainedTokenizerFast) -> None:
    text = tok.apply_chat_template(AGENT_CHAT, tokenize=False)
    calls = [json.loads(m) for m in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S)]
    assert calls == [
        {"name": "read_file", "arguments": {"path": "notes.txt"}},
        {"name": "terminal", "arguments": {"command": "wc -w notes.txt"}},
    ]
    # Content before a tool call is kept and separated by a newline; None content renders empty.
    assert "<|im_start|>assistant\nLet me read the file first.\n<tool_call>\n" in text
    assert "<|im_start|>assistant\n<tool_call>\n" in text
    assert text.count("<|im_start|>tool\n<tool_response>\n") == 2


def test_generation_prefix_is_a_prefix_of_each_assistant_turn(
    tok: PreTrainedTokenizerFast,
) -> None:
    """The invariant tokenize_for_trainer's masking relies on, in text and in tokens."""
    for i, message in enumerate(AGENT_CHAT):
        if message["role"] != "assistant":
            continue
        head = tok.apply_chat_template(AGENT_CHAT[:i], add_generation_prompt=True)
        full = tok.apply_chat_template(AGENT_CHAT[: i + 1])
        assert full[: len(head)] == head, f"turn {i}"


# Whitespace-heavy text with multi-byte characters; no "<" so it cannot spell a special token.
_CONTENT = st.text(alphabet=st.sampled_from(list("ab Zx9 \n\n\t{}\":,.é✓_-")), max_size=24)


@settings(max_examples=60, deadline=None)
@given(reply=_CONTENT, first=_CONTENT, tool_out=_CONTENT)
def test_prompt_and_reply_encode_like_the_whole_conversation(
    tok: PreTrainedTokenizerFast, reply: str, first: str, tool_out: str
) -> None:
    """Encoding the prompt and the reply separately equals encoding the rendered whole.

    This holds for any reply (leading newlines and spaces included) because every newline is its
    own pre-token; without that, masks computed from prefix lengths drift by a token.
    """
    chat = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": first, "tool_calls": [{"name": "f", "arguments": {}}]},
        {"role": "tool", "content": tool_out},
        {"role": "assistant", "content": reply},
    ]
    for i in (1, 3):
        prompt = tok.apply_chat_template(chat[:i], tokenize=False, add_generation_prompt=True)
        whole = tok.apply_chat_template(chat[: i + 1], tokenize=False)
        assert whole.startswith(prompt)
        separately = tok.encode(prompt, add_special_tokens=False) + tok.encode(
            whole[len(prompt):], add_special_tokens=False
        )
        assert separately == tok.encode(whole, add_special_tokens=False)
    out = tokenize_for_trainer(tok, chat, train_on_all_assistant_turns=True)
    _check_trainer_output(out, *_expected_masks(tok, chat, last_only=False))


# --- the transformers-5 guard: atroposlib tokenize_for_trainer --------------------------------


def _assistant_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of assistant output: after the role header up to and incl. '<|im_end|>\\n'.

    Found in the rendered text, independently of tokenize_for_trainer's prefix arithmetic.
    """
    header, end = "<|im_start|>assistant\n", "<|im_end|>\n"
    spans = []
    for match in re.finditer(re.escape(header), text):
        start = match.end()
        spans.append((start, text.index(end, start) + len(end)))
    return spans


def _expected_masks(tok: PreTrainedTokenizerFast, chat: list[dict], last_only: bool) -> tuple:
    text = tok.apply_chat_template(chat, tokenize=False)
    spans = _assistant_spans(text)
    if last_only:
        spans = spans[-1:]
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    masks = []
    for token_id, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
        inside = any(s <= a and b <= e for s, e in spans)
        straddles = any(a < s < b or a < e < b for s, e in spans)
        assert not straddles, f"token {token_id} at {a}:{b} crosses an assistant boundary"
        masks.append(token_id if inside else -100)
    return enc["input_ids"], masks


def _trained(tok: PreTrainedTokenizerFast, out: dict) -> str:
    """Decoded text of the tokens that carry a training signal (mask != -100)."""
    pairs = zip(out["tokens"], out["masks"], strict=True)
    return tok.decode([t for t, m in pairs if m != -100])


def _check_trainer_output(out: dict, tokens: list[int], masks: list[int]) -> None:
    """Fails on transformers>=5 output: a BatchEncoding is not a list (and has len == 2)."""
    assert type(out["tokens"]) is list, f"tokens is {type(out['tokens']).__name__}, not list"
    assert all(type(t) is int for t in out["tokens"])
    assert type(out["masks"]) is list and all(type(m) is int for m in out["masks"])
    assert len(out["masks"]) == len(out["tokens"])
    assert out["tokens"] == tokens
    assert out["masks"] == masks
    assert any(m != -100 for m in out["masks"]), "no trainable token"
    assert all(m in (-100, t) for m, t in zip(out["masks"], out["tokens"], strict=True))


@pytest.mark.parametrize("all_turns", [False, True], ids=["last-turn", "all-assistant-turns"])
def test_tokenize_for_trainer_masks_only_assistant_output(
    tok: PreTrainedTokenizerFast, all_turns: bool
) -> None:
    out = tokenize_for_trainer(tok, AGENT_CHAT, train_on_all_assistant_turns=all_turns)
    tokens, masks = _expected_masks(tok, AGENT_CHAT, last_only=not all_turns)
    _check_trainer_output(out, tokens, masks)
    trained = _trained(tok, out)
    if all_turns:
        assert trained.count("<|im_end|>") == 4 and "<tool_call>" in trained
        assert "notes.txt and tell me" not in trained and "alpha" not in trained
    else:
        assert trained == "There are 3 words in notes.txt.<|im_end|>\n"


def test_guard_detects_transformers5_style_batch_encoding(
    tok: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proves the guard above can fail: emulate transformers 5 on this tokenizer instance.

    transformers 5 changed apply_chat_template(tokenize=True) to return a BatchEncoding
    (return_dict=True by default). tokenize_for_trainer then takes len() of a 2-key mapping as
    the prefix length and slices the encoding, returning a BatchEncoding as "tokens" and a
    2-element masks list - no exception, just wrong data. _check_trainer_output rejects it.
    """
    fresh = AutoTokenizer.from_pretrained(tokenizer_path())
    original = fresh.apply_chat_template

    def v5_apply_chat_template(conversation, **kwargs):
        if kwargs.get("tokenize", True):
            kwargs["return_dict"] = True
        return original(conversation, **kwargs)

    monkeypatch.setattr(fresh, "apply_chat_template", v5_apply_chat_template)
    assert isinstance(fresh.apply_chat_template(AGENT_CHAT), BatchEncoding)
    out = tokenize_for_trainer(fresh, AGENT_CHAT)
    tokens, masks = _expected_masks(tok, AGENT_CHAT, last_only=True)
    with pytest.raises(AssertionError):
        _check_trainer_output(out, tokens, masks)


def test_tokenize_for_trainer_pitfalls_are_as_documented(tok: PreTrainedTokenizerFast) -> None:
    """Facts the base env relies on (see the tokenizer report), pinned so a change is noticed.

    1. Default mode trains on everything after the last message's generation prefix, so a chat
       ending with a tool message would train on the tool output: callers must end with an
       assistant message or use train_on_all_assistant_turns=True.
    2. finish_reason="length" only drops a final eos token, but the ChatML template ends with
       "<|im_end|>\\n", so nothing is dropped: a truncated reply is still trained to end.
    3. tools are not passed to apply_chat_template: the tool schemas are not in the tokens.
    """
    ends_with_tool = AGENT_CHAT[:4]
    out = tokenize_for_trainer(tok, ends_with_tool)
    trained = _trained(tok, out)
    assert "alpha" in trained  # tool output is (wrongly) trainable in default mode
    out = tokenize_for_trainer(tok, ends_with_tool, train_on_all_assistant_turns=True)
    trained = _trained(tok, out)
    assert "alpha" not in trained and "Let me read the file first." in trained

    full = tokenize_for_trainer(tok, AGENT_CHAT)
    cut = tokenize_for_trainer(tok, AGENT_CHAT, finish_reason="length")
    assert cut["tokens"] == full["tokens"]
    assert tok.decode(cut["tokens"][-2:]) == "<|im_end|>\n"
    assert "<tools>" not in tok.decode(full["tokens"])
