"""Which completion earned each score of a plain env's ``ScoredDataGroup``: by content.

A plain env asks for a group's completions (one ``chat_completion(n=group_size)``, a split of
it, or one request per rollout) and returns a ``ScoredDataGroup`` whose entries need not be in
the order of the completions: many Atropos envs ``random.shuffle(rollout_group_data)`` before
scoring, drop entries (length filters, ``None`` scores) or return fewer. Giving ``scores[i]``
to completion ``i`` then puts rewards on the wrong replies (issue 45). Here each entry is
matched to the completion(s) it holds:

- **tokens**: a completion whose token ids are known (vLLM/SGLang ``/generate``) is the entry's
  when those ids are a contiguous run of the entry's ``tokens``;
- **text**: else the completion's text (its reply content, or a completion's ``text``) must
  appear in the entry's own text — its last assistant message (``messages``), its trained
  tokens decoded (``masks`` != -100), or all its tokens decoded — compared with whitespace
  collapsed; the longest contained completion wins (a reply that is a prefix of another's);
- **close text**: else the most similar completion, when it is clearly the most similar
  (an env that trims or rewrites a reply before tokenizing it).

Completions nobody claimed are *dropped* rollouts (no reward, the reason said); entries that
claim the same text as others (identical completions) share those completions: when their
scores agree nothing is lost, else each such rollout is marked ``ambiguous``. An entry that
matches nothing is counted on the group, never given to a neighbour. Where no completion text is
known (no session, a streamed reply) the harness falls back to position and says so on every
rollout (``attribution: "position"``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attribution", "Candidate", "Unit", "attribute", "candidates_of", "entry_texts",
           "is_placeholder"]

_SPACE = re.compile(r"\s+")
#: a rewritten reply is called a completion's when its similarity ratio (difflib) reaches this
#: and beats every other completion's by ``CLEAR_MARGIN`` (unrelated replies score ~0.1-0.35)
CLOSE_ENOUGH = 0.5
CLEAR_MARGIN = 0.15
#: beyond this many characters on a side, close-text matching is skipped (quadratic)
_FUZZY_LIMIT = 20_000


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Candidate:
    """One completion the group's traffic answered: sample ``sample`` of request ``seq``."""

    seq: int
    sample: int
    text: str
    ids: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        return _norm(self.text)


@dataclass
class Unit:
    """One rollout of the group: the completions it holds and the entry that scored them."""

    candidates: list[Candidate]
    entry: int | None = None  # index into the returned group's entries; None = dropped
    ambiguous: bool = False
    how: str = ""  # "tokens" | "text" | "close text" | "position"

    @property
    def first(self) -> tuple[int, int]:
        return min((c.seq, c.sample) for c in self.candidates) if self.candidates else (1 << 30,
                                                                                         0)


@dataclass
class Attribution:
    """The group's rollouts, in the order of their completions, and what matched nothing."""

    units: list[Unit] = field(default_factory=list)
    unmatched_entries: list[int] = field(default_factory=list)
    by_position: bool = False


def _choice_text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    if isinstance(message, dict):
        parts = [message.get("content") if isinstance(message.get("content"), str) else ""]
        for call in message.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
        return "\n".join(p for p in parts if p)
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def candidates_of(answers: Sequence[tuple[int, dict[str, Any]]]) -> list[Candidate] | None:
    """Every completion in the group's answers (seq order); None when one cannot be read
    (a streamed reply, an unknown shape): the caller then attributes by position."""
    out: list[Candidate] = []
    for seq, response in sorted(answers, key=lambda a: a[0]):
        body = response.get("body") if isinstance(response, dict) else None
        if isinstance(body, dict) and isinstance(body.get("choices"), list):
            choices = [c for c in body["choices"] if isinstance(c, dict)]
            for k, choice in enumerate(choices):
                index = choice.get("index")
                sample = index if isinstance(index, int) and not isinstance(index, bool) else k
                out.append(Candidate(seq, sample, _choice_text(choice)))
        elif isinstance(body, dict) and isinstance(body.get("finish_reasons"), list):  # vLLM
            n = len(body["finish_reasons"])
            texts = body.get("text") if isinstance(body.get("text"), list) else [""] * n
            ids = body.get("token_ids") if isinstance(body.get("token_ids"), list) else None
            if ids is None and isinstance(body.get("logprobs"), list):
                ids = [_ids_of_logprobs(lp) for lp in body["logprobs"]]
            for k in range(n):
                own = tuple(ids[k]) if ids is not None and k < len(ids) else ()
                text = texts[k] if k < len(texts) and isinstance(texts[k], str) else ""
                out.append(Candidate(seq, k, text, own))
        elif isinstance(body, list) and all(isinstance(x, dict) for x in body):  # SGLang
            for k, one in enumerate(body):
                ids = one.get("output_ids")
                out.append(Candidate(seq, k, str(one.get("text") or ""),
                                     tuple(ids) if isinstance(ids, list) else ()))
        elif isinstance(body, dict) and isinstance(body.get("text"), str):  # SGLang, n = 1
            ids = body.get("output_ids")
            out.append(Candidate(seq, 0, body["text"], tuple(ids) if isinstance(ids, list)
                                 else ()))
        else:
            return None
    return out


def _ids_of_logprobs(per_token: Any) -> tuple[int, ...]:
    """vLLM's ``logprobs`` of one sample: a list of ``[{"<token id>": logprob}]`` per token."""
    ids: list[int] = []
    for position in per_token if isinstance(per_token, list) else []:
        first = position[0] if isinstance(position, list) and position else position
        if not isinstance(first, dict) or not first:
            return ()
        try:
            ids.append(int(next(iter(first))))
        except ValueError:
            return ()
    return tuple(ids)


def entry_texts(group: dict[str, Any], tokenizer: Any) -> list[list[str]]:
    """Each entry's own texts, most specific first: its last assistant message, its trained
    tokens decoded, all its tokens decoded."""
    tokens = group.get("tokens") if isinstance(group.get("tokens"), list) else []
    masks = group.get("masks") if isinstance(group.get("masks"), list) else []
    messages = group.get("messages") if isinstance(group.get("messages"), list) else []
    count = max(len(tokens), len(messages), len(group.get("scores") or []))
    out: list[list[str]] = []
    for i in range(count):
        texts: list[str] = []
        conv = messages[i] if i < len(messages) else None
        if isinstance(conv, list):
            said = [m.get("content") for m in conv if isinstance(m, dict)
                    and m.get("role") == "assistant" and isinstance(m.get("content"), str)]
            if said:
                texts.append("\n".join(said))
        ids = tokens[i] if i < len(tokens) and isinstance(tokens[i], list) else None
        mask = masks[i] if i < len(masks) and isinstance(masks[i], list) else None
        if ids is not None and tokenizer is not None and not is_placeholder(ids, mask):
            if mask is not None and len(mask) == len(ids):
                trained = [t for t, m in zip(ids, mask, strict=True) if m != -100]
                if trained and len(trained) < len(ids):
                    texts.append(_decode(tokenizer, trained))
            texts.append(_decode(tokenizer, ids))
        out.append([t for t in texts if t])
    return out


def is_placeholder(seq: Any, mask: Any) -> bool:
    """atroposlib's DummyManagedServer output — its fixed tokens and masks, which the harness
    turns on for ``managed_server`` over an OpenAI endpoint (``plain_env``): no content."""
    try:
        from atroposlib.envs.server_handling.managed_server import DummyManagedServer
    except ImportError:
        return False
    return (seq == DummyManagedServer.DUMMY_TOKENS
            and mask == DummyManagedServer.DUMMY_MASKED_TOKENS)


def _decode(tokenizer: Any, ids: list[Any]) -> str:
    try:
        return str(tokenizer.decode([int(t) for t in ids], clean_up_tokenization_spaces=False))
    except Exception:  # an odd tokenizer or id: no text from these tokens
        return ""


def _contains(haystack: Sequence[Any], needle: Sequence[Any]) -> bool:
    n = len(needle)
    if n == 0 or n > len(haystack):
        return False
    first = needle[0]
    return any(haystack[i] == first and tuple(haystack[i:i + n]) == tuple(needle)
               for i in range(len(haystack) - n + 1))


def _claims(tokens: Any, texts: list[str], cands: list[Candidate]) -> tuple[list[int], str]:
    """The candidates an entry holds (indices into ``cands``) and how that was seen."""
    ids = tokens if isinstance(tokens, list) else []
    by_ids = [j for j, c in enumerate(cands) if c.ids and _contains(ids, c.ids)]
    if by_ids:
        return by_ids, "tokens"
    normed = [_norm(t) for t in texts]
    by_text = [j for j, c in enumerate(cands) if c.key and any(c.key in t for t in normed)]
    if by_text:
        return by_text, "text"
    if not normed:
        return [], ""
    scored = []
    for j, c in enumerate(cands):
        if c.key and len(c.key) <= _FUZZY_LIMIT:
            scored.append((max(difflib.SequenceMatcher(None, c.key, t[:_FUZZY_LIMIT],
                                                       autojunk=False).ratio()
                               for t in normed), j))
    scored.sort(reverse=True)
    if scored and scored[0][0] >= CLOSE_ENOUGH and (len(scored) == 1
                                                    or scored[0][0] - scored[1][0] >= CLEAR_MARGIN):
        return [scored[0][1]], "close text"
    return [], ""


def attribute(group: dict[str, Any], cands: list[Candidate] | None,
              tokenizer: Any) -> Attribution:
    """The rollouts of one returned group (see the module docstring)."""
    scores = group.get("scores") if isinstance(group.get("scores"), list) else []
    if not cands:
        return Attribution([Unit([], i, how="position") for i in range(len(scores))],
                           by_position=True)
    tokens = group.get("tokens") if isinstance(group.get("tokens"), list) else []
    masks = group.get("masks") if isinstance(group.get("masks"), list) else []
    texts = entry_texts(group, tokenizer)
    tokens = [None if i < len(masks) and is_placeholder(t, masks[i]) else t
              for i, t in enumerate(tokens)]
    if not any(texts) and not any(tokens):  # placeholders only: nothing to match by
        return Attribution([Unit([], i, how="position") for i in range(len(scores))],
                           by_position=True)
    claims: list[tuple[list[int], str]] = []
    for i in range(len(scores)):
        held, how = _claims(tokens[i] if i < len(tokens) else None,
                            texts[i] if i < len(texts) else [], cands)
        claims.append((held, how))
    widest = [(_widest(held, cands), how) for held, how in claims]
    if all(len({cands[j].key for j in held}) <= 1 for held, _ in widest):
        return _one_each(scores, widest, cands)
    return _conversations(claims, cands)


def _widest(held: list[int], cands: list[Candidate]) -> list[int]:
    """``held`` without the completions whose text is part of another one's it holds (a
    short reply inside a longer one is not a second completion of the entry)."""
    keys = {cands[j].key for j in held}
    return [j for j in held if not any(cands[j].key != k and cands[j].key in k for k in keys)]


def _one_each(scores: list[Any], claims: list[tuple[list[int], str]],
              cands: list[Candidate]) -> Attribution:
    """Each entry holds one completion: a rollout per completion, dropped if none holds it."""
    units = [Unit([c]) for c in cands]
    out = Attribution(units)
    # completions alike in text are one class: entries claiming it fill its slots in order
    classes: dict[str, list[int]] = {}
    for j, c in enumerate(cands):
        classes.setdefault(c.key, []).append(j)
    taken: dict[str, list[int]] = {}
    for i, (held, how) in enumerate(claims):
        if not held:
            out.unmatched_entries.append(i)
            continue
        key = cands[held[0]].key
        slots = classes[key]
        used = taken.setdefault(key, [])
        if len(used) >= len(slots):  # more entries than completions with this text
            out.unmatched_entries.append(i)
            continue
        j = slots[len(used)]
        used.append(i)
        units[j].entry, units[j].how = i, how
    for key, entries in taken.items():
        if len(classes[key]) > 1 and len({_score_key(scores[i]) for i in entries}) > 1:
            for j in classes[key]:  # alike replies, unlike scores: which is whose is unknown
                units[j].ambiguous = True
    return out


def _score_key(value: Any) -> Any:
    return round(float(value), 9) if isinstance(value, (int, float)) else repr(value)


def _one_per_text(held: list[int], cands: list[Candidate], taken: set[int]) -> list[int]:
    """``held`` with one completion per distinct text: an entry that holds a reply once holds
    one of the completions alike in text, the first no earlier entry took."""
    out: list[int] = []
    for key in dict.fromkeys(cands[j].key for j in held):
        alike = [j for j in held if cands[j].key == key]
        j = next((x for x in alike if x not in taken), alike[0])
        taken.add(j)
        out.append(j)
    return sorted(out)


def _conversations(claims: list[tuple[list[int], str]], cands: list[Candidate]) -> Attribution:
    """Entries hold several completions each (multi-turn rollouts): a rollout per entry, its
    own turns the completions it holds; a completion held by two entries is ambiguous."""
    owners: dict[int, int] = {}
    taken: set[int] = set()
    claims = [(_one_per_text(held, cands, taken), how) for held, how in claims]
    for held, _ in claims:
        for j in held:
            owners[j] = owners.get(j, 0) + 1
    out = Attribution()
    for i, (held, how) in enumerate(claims):
        if not held:
            out.unmatched_entries.append(i)
            continue
        out.units.append(Unit([cands[j] for j in held], i, how=how,
                              ambiguous=any(owners[j] > 1 for j in held)))
    claimed = set(owners)
    out.units.extend(Unit([c]) for j, c in enumerate(cands) if j not in claimed)
    out.units.sort(key=lambda u: u.first)
    return out
