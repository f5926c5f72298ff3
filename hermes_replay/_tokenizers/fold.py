"""Phase-2 token ids for reading: ``show`` folds each list of token ids (``/generate`` prompts
and outputs) into one line with its decoded text, using the tokenizer the cassette names
(the bundled one, or the copy stored beside the cassette). ``show --raw`` keeps the ids."""

from __future__ import annotations

from typing import Any

from hermes_replay._tokenizers.decode import Decoder, token_decoder

__all__ = ["MIN_FOLDED", "fold_token_lists", "token_decoder"]

MIN_FOLDED = 8  # shorter int lists (shapes, a few ids) stay as they are
_TEXT_SHOWN = 160


def _is_token_list(value: Any) -> bool:
    return (isinstance(value, list) and len(value) >= MIN_FOLDED
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def _is_float_list(value: Any) -> bool:
    return (isinstance(value, list) and len(value) >= MIN_FOLDED
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value))


def _logprob_entry(value: Any) -> int | None:
    """The token id of one vLLM-style logprob entry (``{"id": lp}``, maybe in a list)."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and value and all(
            isinstance(k, str) and k.isdigit() for k in value) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        return int(next(iter(value)))
    return None


def _fold_ids(ids: list[int], decode: Decoder | None, what: str) -> str:
    if decode is None:
        return f"⟨{len(ids)} {what}; no tokenizer at hand to decode them — --raw⟩"
    try:
        text = decode(ids)
    except Exception:
        return f"⟨{len(ids)} {what} (not decodable by the recorded tokenizer)⟩"
    shown = text if len(text) <= _TEXT_SHOWN else text[:_TEXT_SHOWN] + "…"
    return f"⟨{len(ids)} {what}⟩ {shown!r}"


def fold_token_lists(value: Any, decode: Decoder | None) -> Any:
    """``value`` with each long list of token ids replaced by one readable string, and each
    long list of numbers (logprobs) by its length; everything else unchanged."""
    if _is_token_list(value):
        return _fold_ids(value, decode, "token ids")
    if isinstance(value, list) and len(value) >= MIN_FOLDED:
        ids = [_logprob_entry(v) for v in value]
        if all(i is not None for i in ids):
            return _fold_ids([i for i in ids if i is not None], decode, "logprob entries")
    if _is_float_list(value):
        return f"⟨{len(value)} numbers (e.g. logprobs) — --raw shows them⟩"
    if isinstance(value, dict):
        return {k: fold_token_lists(v, decode) for k, v in value.items()}
    if isinstance(value, list):
        return [fold_token_lists(v, decode) for v in value]
    return value
