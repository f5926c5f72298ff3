"""Long texts are tokenized in bounded pieces with exactly the ids of one whole-text encode.

Small piece sizes force many cuts on short texts, so each example crosses piece boundaries;
texts mix ASCII words, multi-byte characters (accents, CJK, emoji with modifiers, combining
marks), newlines and the tokenizer's special and markup tokens. Besides the project's
byte-level BPE, a SentencePiece-like tokenizer (NFC normalizer, ``▁`` prefixed to a text's
first word, merges learned across words) is used, where naive cuts do change the ids.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from tokenizers.trainers import BpeTrainer
from transformers import PreTrainedTokenizerFast

from environments._chunked import _backend, encode_ids, pieces
from environments._tokens import MASK, tokens_and_masks
from hermes_replay._tokenizers.bundled import load_tokenizer

FRAGMENTS = [
    "the", " answer", " follows", " from", " numbers", " café", " naïve", " e\u0301t\u0301e\u0301",
    "日本語のテキスト", " 中文", " 👍🏽", " 👨‍👩‍👧", " ünïcödé", "\n", "\n\n", "  ", " ", "\t",
    "1234", " 3.14", "!!", "?", "<|im_end|>", "<|im_start|>", "<tool_call>", "</tool_call>",
    "<think>", " x", "ab", "Ω",
]
texts = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=400).map("".join)


def build_sentencepiece_like() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    # split=False: one pre-token per text, so merges across words are learned and a cut
    # before a space is not automatically safe.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    corpus = ["".join(FRAGMENTS[(i * 7 + j) % len(FRAGMENTS)] for j in range(12))
              for i in range(300)]
    tok.train_from_iterator(corpus, BpeTrainer(vocab_size=400, special_tokens=["<unk>"],
                                               show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok)


@pytest.fixture(scope="module")
def sentencepiece_like() -> PreTrainedTokenizerFast:
    return build_sentencepiece_like()


def _whole(tokenizer: PreTrainedTokenizerFast, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, chunk=st.integers(min_value=8, max_value=96))
def test_pieces_give_the_ids_of_one_encode_bytelevel(text: str, chunk: int) -> None:
    tok = load_tokenizer()
    assert encode_ids(tok, text, chunk=chunk) == _whole(tok, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, chunk=st.integers(min_value=8, max_value=96))
def test_pieces_give_the_ids_of_one_encode_sentencepiece_like(
        sentencepiece_like: PreTrainedTokenizerFast, text: str, chunk: int) -> None:
    assert encode_ids(sentencepiece_like, text, chunk=chunk) == _whole(sentencepiece_like, text)


def test_texts_are_really_cut_and_naive_cuts_would_differ() -> None:
    tok = load_tokenizer()
    text = ("Voilà: the naïve café 👍🏽 sold 日本語のテキスト; <|im_end|> then <tool_call>\n" * 40)
    cuts = list(pieces(_backend(tok), text, chunk=50))
    assert len(cuts) > 30  # many pieces, so the equality below crosses many boundaries
    assert cuts[0][0] == 0 and cuts[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))
    assert encode_ids(tok, text, chunk=50) == _whole(tok, text)
    # The check matters: cutting every 50 characters without it gives other ids.
    naive = [i for s in range(0, len(text), 50) for i in _whole(tok, text[s:s + 50])]
    assert naive != _whole(tok, text)


def test_a_cut_is_never_taken_inside_a_special_token_or_a_combined_character(
        sentencepiece_like: PreTrainedTokenizerFast) -> None:
    tok = load_tokenizer()
    text = "word " * 9 + "<|im_end|>" + "x" * 3 + " tail" * 30
    for start, end in pieces(_backend(tok), text, chunk=48):
        assert not text[start:end].endswith(("<|im", "<|im_", "<|im_end"))
    combining = ("e\u0301" * 200) + " end"
    for _, end in pieces(_backend(sentencepiece_like), combining, chunk=40):
        assert end == len(combining) or combining[end] != "\u0301"
    assert encode_ids(sentencepiece_like, combining, chunk=40) == _whole(sentencepiece_like,
                                                                          combining)


def test_a_text_with_no_safe_cut_is_encoded_whole() -> None:
    tok = load_tokenizer()
    text = "日本語" * 3000  # one letter run: no boundary a pre-tokenizer would split at
    assert len(list(pieces(_backend(tok), text, chunk=64))) == 1
    assert encode_ids(tok, text, chunk=64) == _whole(tok, text)


def test_a_huge_reply_gets_the_tokens_and_masks_of_the_template() -> None:
    tok = load_tokenizer()
    reply = "Step by careful step, the café's 👍🏽 total is 42.\n" * 8000  # ~400 K characters
    chat = [{"role": "user", "content": "Add it up."}, {"role": "assistant", "content": reply}]
    tokens, masks = tokens_and_masks(tok, chat)
    rendered = tok.apply_chat_template(chat, tokenize=False)
    assert tokens == _whole(tok, rendered)
    trained = tok.decode([t for t, m in zip(tokens, masks, strict=True) if m != MASK])
    assert trained == reply + "<|im_end|>"
