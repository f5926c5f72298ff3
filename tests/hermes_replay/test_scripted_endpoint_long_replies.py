"""The scripted endpoint splits long replies into tokens in linear work (huge outputs).

``_tokens.pieces`` (used for ``max_tokens`` truncation and logprobs) once decoded growing
prefixes of the whole reply: quadratic, about a minute for a 40 KB reply, during which the
endpoint's event loop answers nothing. The test counts the token ids decoded, not seconds.
"""

from __future__ import annotations

from typing import Any

import pytest

from hermes_replay.scripted_endpoint import _tokens


@pytest.mark.parametrize("text", ["hello world " * 900, "héllo wörld ✓ 日本語 🎉 " * 400])
def test_pieces_of_a_long_reply_are_exact_and_linear(text: str, monkeypatch) -> None:
    tokenizer = _tokens.get_tokenizer()
    if tokenizer is None:
        pytest.fail("the project tokenizer could not be loaded")
    decoded = 0

    class Counting:
        def encode(self, *args: Any, **kwargs: Any) -> Any:
            return tokenizer.encode(*args, **kwargs)

        def decode(self, ids: list[int], *args: Any, **kwargs: Any) -> str:
            nonlocal decoded
            decoded += len(ids)
            return tokenizer.decode(ids, *args, **kwargs)

    monkeypatch.setattr(_tokens, "get_tokenizer", lambda: Counting())
    parts = _tokens.pieces(text)
    assert "".join(parts) == text
    n = _tokens.count(text)
    assert len(parts) == n
    # each id is decoded once, plus a few more around multi-byte characters; growing
    # prefixes would decode about n*n/2 ids
    assert decoded <= 4 * n, f"{decoded} ids decoded for {n} tokens: not linear"
