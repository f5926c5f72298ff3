"""Training tokens per rollout: which tokens the trainer learns from, and their logprobs.

A ``process`` run writes its scored groups (``groups.jsonl``: per rollout ``tokens``,
``masks`` — -100 where nothing is learned — ``messages`` and, in Phase 2, the inference
``inference_logprobs``), but no rollout ids. A group entry is matched to its rollout by what
the recording holds (``match_groups``): its conversation in Phase 1, its prompt tokens in
Phase 2. The matched entry's messages also give a Phase 2 rollout its transcript (its
requests hold token ids, not messages).

Token ids are shown as text through the tokenizer the cassette names (the bundled one, or the
copy in the cassette store); a token's text is decoded once per distinct id, into a shared
vocabulary table. Without the tokenizer the page shows ids.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hermes_replay._cassette import Cassette
from hermes_replay._cassette.messages import conversation, text_of

__all__ = ["TokenView", "match_groups"]

_log = logging.getLogger(__name__)
MASKED = -100


def _key(messages: list[Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(m.get("role")), text_of(m.get("content")))
                 for m in messages if isinstance(m, dict))


def _prompt_ids(inter: Any) -> tuple[int, ...]:
    """The token ids a Phase 2 ``/generate`` request sent (empty for chat requests)."""
    body = inter.request.get("body")
    prompt = body.get("prompt") if isinstance(body, dict) else None
    ids = prompt.get("prompt_token_ids") if isinstance(prompt, dict) else None
    if not ids and isinstance(body, dict):
        ids = body.get("input_ids")
    return tuple(ids) if isinstance(ids, list) else ()


def _starts_with(seq: list[Any], prefix: tuple[Any, ...]) -> bool:
    return len(seq) >= len(prefix) and tuple(seq[: len(prefix)]) == prefix


class _Candidates:
    """Rollouts a scored sequence may belong to, indexed by a key its start must equal:
    the chat conversation (Phase 1), or the first prompt's token ids (Phase 2)."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[Any, ...], list[str]] = {}
        self.lengths: set[int] = set()

    def add(self, key: tuple[Any, ...], rid: str) -> None:
        if key:
            self.by_key.setdefault(key, []).append(rid)
            self.lengths.add(len(key))

    def find(self, seq: tuple[Any, ...] | list[Any]) -> list[str]:
        for length in sorted(self.lengths, reverse=True):
            found = self.by_key.get(tuple(seq[:length])) if length <= len(seq) else None
            if found:
                return found
        return []


def match_groups(cassette: Cassette | None, groups: list[dict[str, Any]]
                 ) -> dict[str, dict[str, Any]]:
    """``rollout id -> {"tokens", "masks", "logprobs", "messages"}`` for the scored rollouts
    that match a recording. Phase 1: the recorded conversation is a prefix of the scored
    messages. Phase 2 (token requests): the rollout's last prompt is a prefix of the scored
    tokens; group mates share their first prompt, so among them the longest matching prompt,
    then the same reward, decides. Indistinguishable rollouts (same requests, same reward)
    may swap; they differ at most in the reply to their last request."""
    if cassette is None or not groups:
        return {}
    chats, prompts = _Candidates(), _Candidates()
    last_prompt: dict[str, tuple[int, ...]] = {}
    for rid, record in sorted(cassette.rollouts.items()):
        inters = sorted(record.interactions, key=lambda i: i.seq)
        ids = [_prompt_ids(i) for i in inters]
        if any(ids):
            prompts.add(next(p for p in ids if p), rid)
            last_prompt[rid] = max(ids, key=len)
        else:
            chats.add(_key(conversation(record)), rid)
    found: dict[str, dict[str, Any]] = {}
    for group in groups:
        tokens, masks = group.get("tokens") or [], group.get("masks") or []
        messages, scores = group.get("messages") or [], group.get("scores") or []
        logprobs = group.get("inference_logprobs") or []
        for i, seq in enumerate(tokens):
            if i >= len(masks) or not isinstance(seq, list):
                continue
            msgs = messages[i] if i < len(messages) and isinstance(messages[i], list) else []
            pool = [r for r in prompts.find(seq) if r not in found]
            if pool:
                score = scores[i] if i < len(scores) else None
                outcome = {r: cassette.rollouts[r].outcome.get("reward") for r in pool}
                pool = [r for r in pool if _starts_with(seq, last_prompt[r])] or pool
                rid = max(pool, key=lambda r: (len(last_prompt[r]), outcome[r] == score))
            else:
                pool = [r for r in chats.find(_key(msgs)) if r not in found]
                if not pool:
                    continue
                rid = pool[0]
            found[rid] = {"tokens": seq, "masks": masks[i], "messages": msgs,
                          "logprobs": logprobs[i] if i < len(logprobs) else None}
    return found


class TokenView:
    """Turns token ids into page entries, decoding each distinct id once."""

    def __init__(self, cassette: Cassette | None) -> None:
        self.vocab: dict[int, str] = {}
        self._tokenizer = _load_tokenizer(cassette)

    def entry(self, data: dict[str, Any]) -> dict[str, Any]:
        ids = [int(t) for t in data["tokens"]]
        masks = data["masks"]
        kept = masks[:len(ids)]  # a list, not a generator: the join is a third the time
        trained = ("".join(["0" if m == MASKED else "1" for m in kept])
                   + "0" * (len(ids) - len(kept)))
        for token in ids:
            if token not in self.vocab:
                self.vocab[token] = self._decode(token)
        out: dict[str, Any] = {"ids": ids, "trained": trained}
        logprobs = data.get("logprobs")
        if isinstance(logprobs, list) and logprobs:
            out["logprobs"] = [round(float(x), 4) if isinstance(x, (int, float)) else None
                               for x in logprobs]
        return out

    def _decode(self, token: int) -> str:
        if self._tokenizer is None:
            return f"<{token}>"
        try:
            return str(self._tokenizer.decode([token], skip_special_tokens=False))
        except Exception:  # an id outside the vocabulary: show the id, never fail the page
            return f"<{token}>"


def _load_tokenizer(cassette: Cassette | None) -> Any:
    """The tokenizer the cassette was recorded with: the bundled one, or the copy in this
    cassette's own store (``stored_dir``) — never a hub, and never a folder the header names
    (``tokenizer.name`` is data from outside: ``/home/someone/private`` would put that
    tokenizer's vocabulary into report.html, a CI artifact)."""
    if cassette is None:
        return None
    from tokenizers import Tokenizer

    from hermes_replay._tokenizers.bundled import TOKENIZER_NAME, tokenizer_path
    from hermes_replay._tokenizers.store import stored_dir

    recorded = cassette.header.tokenizer or {}
    folder: Path | None = None
    if recorded.get("name") == TOKENIZER_NAME:
        folder = Path(tokenizer_path())
    else:
        folder = stored_dir(cassette.path, recorded)
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    try:
        return Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # a damaged file: the page shows ids instead
        _log.warning("hermes-replay report: cannot load tokenizer %s (%s)", folder, exc)
        return None
