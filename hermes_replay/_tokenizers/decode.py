"""Token ids back to text with the tokenizer a cassette was recorded with.

Used where token ids meet a person: ``show`` folds ``/generate`` ids into their text, and a
miss on a token path (vLLM/SGLang ``/generate``, ``/v1/completions`` with token ids) shows the
decoded prompts' text diff above the ids'. Only ``tokenizers`` is loaded (not transformers):
these are read-only views and should stay quick.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Decoder", "token_decoder"]

Decoder = Callable[[list[int]], str]


def token_decoder(cassette: str | Path, tokenizer: dict[str, Any] | None) -> Decoder | None:
    """A decoder for the tokenizer the cassette header names (its stored copy, or the bundled
    one when the fingerprints agree), or None if none is at hand."""
    from hermes_replay._tokenizers.bundled import tokenizer_fingerprint, tokenizer_path
    from hermes_replay._tokenizers.store import stored_dir

    info = tokenizer or {}
    folder = stored_dir(cassette, info)
    if folder is None and info.get("fingerprint"):
        try:
            if info["fingerprint"] == tokenizer_fingerprint():
                folder = Path(tokenizer_path())
        except OSError:
            folder = None
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    try:
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception:  # an unreadable tokenizer only costs the decoded text
        return None
    return lambda ids: backend.decode(ids, skip_special_tokens=False)
