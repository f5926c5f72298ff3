"""One rollout's own sample of a request that answered a whole group (``n > 1``).

A plain env's ``chat_completion(n=group_size)`` is one request whose reply holds every
rollout's completion; each rollout's cassette record says which sample was its own
(``outcome.choice``, ``outcome.traffic`` = the group's id). Every view of one rollout — ``show``,
``show --raw``, the report's transcript, ``diff`` — shows the group's requests narrowed to that
sample, never the first one for all of them. The reply shapes with one entry per sample:
OpenAI chat and completions (``choices``, each with its ``index``), vLLM's ``/generate``
(parallel lists: ``text``, ``logprobs``, ``finish_reasons`` …), SGLang's (a list of outputs).
atroposlib splits a large ``n`` into several identical requests and joins their samples in
order: sample k is then the k-th across them.

Since rewards are attributed by content (``_runner.plain_attrib``), a rollout's record names
its own samples exactly (``outcome.samples``: ``[[seq, k], …]``, the request and the sample of
its reply): a rollout of a group whose requests are not one split request (one request per
rollout, a multi-turn conversation per rollout) shows only its own requests. ``choice`` stays
for cassettes recorded before.
"""

from __future__ import annotations

from typing import Any

from hermes_replay._cassette.model import Interaction

__all__ = ["POSITION_NOTE", "attribution_note", "own_choices", "own_part", "sample_count"]


def _body(inter: Interaction) -> Any:
    response = inter.response
    return response.get("body") if isinstance(response, dict) else None


def sample_count(inter: Interaction) -> int:
    """How many samples the reply holds (1 when it is not a multi-sample shape)."""
    body = _body(inter)
    if isinstance(body, dict) and isinstance(body.get("choices"), list):
        return len(body["choices"])
    if isinstance(body, dict) and isinstance(body.get("finish_reasons"), list):
        return len(body["finish_reasons"])
    if isinstance(body, list) and body and all(isinstance(x, dict) for x in body):
        return len(body)
    return 1


def _narrowed(inter: Interaction, k: int) -> Interaction:
    body = _body(inter)
    if isinstance(body, dict) and isinstance(body.get("choices"), list):
        choices = body["choices"]
        own = [c for c in choices if isinstance(c, dict) and c.get("index") == k]
        body = {**body, "choices": own or [choices[k]]}
    elif isinstance(body, dict) and isinstance(body.get("finish_reasons"), list):
        n = len(body["finish_reasons"])
        body = {key: [value[k]] if isinstance(value, list) and len(value) == n else value
                for key, value in body.items()}
    elif isinstance(body, list):
        body = [body[k]]
    else:
        return inter
    return inter.model_copy(update={"response": {**inter.response, "body": body}})


def own_choices(interactions: list[Interaction], choice: int) -> list[Interaction]:
    """``interactions`` (a group's, in seq order) narrowed to sample ``choice``: the request
    holding it when they are one split request (identical bodies), else each request that has
    that many samples narrowed to it, the others as they are."""
    ordered = sorted(interactions, key=lambda i: i.seq)
    sizes = [sample_count(i) for i in ordered]
    split = len(ordered) > 1 and all(i.request == ordered[0].request for i in ordered)
    if split and sum(sizes) > choice:
        offset = 0
        for inter, size in zip(ordered, sizes, strict=True):
            if choice < offset + size:
                return [_narrowed(inter, choice - offset)]
            offset += size
    return [_narrowed(i, choice) if size > choice and size > 1 else i
            for i, size in zip(ordered, sizes, strict=True)]


POSITION_NOTE = ("reward given by position, not matched to its reply by content (recorded before "
                 "hermes-replay matched scores to replies, or the replies could not be read): it "
                 "may be another reply's; a replay attributes it by content — re-record to keep "
                 "that")


def _pairs(outcome: dict[str, Any]) -> list[tuple[int, int]] | None:
    raw = outcome.get("samples")
    if not isinstance(raw, list) or not raw:
        return None
    pairs = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                        for x in pair)):
            return None
        pairs.append((pair[0], pair[1]))
    return pairs


def own_part(interactions: list[Interaction], outcome: dict[str, Any]
             ) -> list[Interaction] | None:
    """The group's requests as one of its rollouts saw them: its own samples
    (``outcome.samples``), else its ``choice``; None when its record names neither."""
    pairs = _pairs(outcome)
    if pairs is not None:
        by_seq = {i.seq: i for i in interactions}
        out = [_narrowed(by_seq[seq], k) if sample_count(by_seq[seq]) > 1 else by_seq[seq]
               for seq, k in sorted(pairs) if seq in by_seq]
        if out:
            return out
    choice = outcome.get("choice")
    if isinstance(choice, int) and not isinstance(choice, bool) and choice >= 0:
        return own_choices(interactions, choice)
    return None


def attribution_note(outcome: dict[str, Any],
                     group: dict[str, Any] | None = None) -> str | None:
    """What a view says beside a plain rollout's reward when it is not plainly its own: dropped,
    ambiguous, or given by position (recorded before attribution by content) — unless its
    group's scores are all alike (``group``: the group's outcome), when position is harmless."""
    if outcome.get("dropped"):
        why = outcome["dropped"]
        return f"dropped: {why}" if isinstance(why, str) else "dropped by the env"
    if outcome.get("ambiguous"):
        return f"ambiguous: {outcome['ambiguous']}"
    scores = (group or {}).get("scores")
    if isinstance(scores, list) and len({repr(x) for x in scores}) <= 1:
        return None
    if outcome.get("traffic") and outcome.get("attribution") in (None, "position"):
        return POSITION_NOTE
    return None
