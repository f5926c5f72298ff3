"""Tool-call parsers decode JSON from bounded windows with the whole text's answer.

``decode_prefix`` first decodes a small window of the text (so a failed start costs the
window, not the text before it) and grows it when the decoder came near the cut. Whatever the
window, the value, the end index and whether it fails at all must be those of decoding the
whole text; tiny windows force every value across a cut.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import environments.tool_call_parsers._base as base
from environments.tool_call_parsers import get_parser
from environments.tool_call_parsers._base import MalformedToolCall, decode_prefix

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from('ab é"\\\n\t\x01/{}[]:,0'), max_size=90))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=20)
JUNK = ["", " ", "\n", "x", "}", "]", ",", '"', "\\", "tru", "nul", "-", "1", "e5", "\x00",
        "NaN", "-Infinity", '{"', "```json\n", "\u2028"]


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, int]:
    body = json.dumps(draw(values), ensure_ascii=draw(st.booleans()))
    cut = draw(st.integers(0, len(body)))
    body = body[:cut] if draw(st.booleans()) else body  # truncated values too
    prefix = "".join(draw(st.lists(st.sampled_from(JUNK), max_size=3)))
    suffix = "".join(draw(st.lists(st.sampled_from(JUNK), max_size=4)))
    return prefix + body + suffix, draw(st.integers(0, len(prefix)))


def _whole(text: str, pos: int) -> object:
    try:
        return decode_prefix(text, pos, window=len(text) + 1)
    except MalformedToolCall:
        return "fails"


@settings(max_examples=600, deadline=None)
@given(case=texts(), window=st.integers(1, 40))
def test_any_window_gives_the_whole_texts_value_end_or_failure(case, window):
    text, pos = case
    try:
        got: object = decode_prefix(text, pos, window=window)
    except MalformedToolCall:
        got = "fails"
    assert repr(got) == repr(_whole(text, pos))


def test_whole_text_answer_is_json_raw_decode():
    text = 'say {"name": "f", "arguments": {"n": 12345}} done'
    assert decode_prefix(text, 4, window=3) == json.JSONDecoder().raw_decode(text, 4)
    with pytest.raises(MalformedToolCall):
        decode_prefix("[1, 2, 345", 0, window=4)  # truncated: fails, as on the whole text
    assert decode_prefix("12345678 ", 0, window=3) == (12345678, 8)  # a number across the cut
    # a string longer than the window: the decoder must not call it unterminated
    long = '{"name": "' + "a" * 100 + '"}'
    assert decode_prefix(long, 0, window=40) == ({"name": "a" * 100}, len(long))


def test_many_failed_starts_cost_the_window_not_the_text_before_them():
    """Not a timing assertion: the work is counted as characters handed to the decoder."""
    calls: list[int] = []

    class Counting(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0):  # type: ignore[override]
            calls.append(len(s) - idx)
            return super().raw_decode(s, idx)

    original = base._DECODER
    base._DECODER = Counting()
    try:
        text = 'code: x = {"name": value_var}\n' * 20_000  # 600 K characters, 20 K starts
        assert get_parser("llama3_json").parse(text) == (text, None)
    finally:
        base._DECODER = original
    assert len(calls) == 20_000
    assert max(calls) <= 1025  # each start saw one window, never the rest of the text
