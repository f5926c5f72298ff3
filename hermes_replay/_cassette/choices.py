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
"""

from __future__ import annotations

from typing import Any

from hermes_replay._cassette.model import Interaction

__all__ = ["own_choices", "sample_count"]


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
