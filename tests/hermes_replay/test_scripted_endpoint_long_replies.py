"""The scripted endpoint must answer long replies quickly (issue 8: "huge outputs").

``_tokens.pieces`` (used for ``max_tokens`` truncation and logprobs) decoded growing
prefixes of the whole reply: quadratic, about a minute for a 40 KB reply, during which the
endpoint's event loop answers nothing.
"""

from __future__ import annotations

import time

import pytest

from hermes_replay.scripted_endpoint import _tokens


@pytest.mark.parametrize("text", ["hello world " * 900, "héllo wörld ✓ 日本語 🎉 " * 400])
def test_pieces_of_a_long_reply_are_fast_and_exact(text: str) -> None:
    if _tokens.get_tokenizer() is None:
        pytest.fail("the project tokenizer could not be loaded")
    started = time.perf_counter()
    parts = _tokens.pieces(text)
    elapsed = time.perf_counter() - started
    assert "".join(parts) == text
    assert len(parts) == _tokens.count(text)
    assert elapsed < 2.0, f"{len(text)} characters took {elapsed:.1f} s"
