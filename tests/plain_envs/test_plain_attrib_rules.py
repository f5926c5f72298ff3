"""The matching rules of ``_runner.plain_attrib`` on groups built here (issue 45, item 1).

Entries are tokenized with the bundled tokenizer by atroposlib's own ``tokenize_for_trainer``,
as a community env's ``score()`` does; the completions are reply bodies in the shapes the
harness records (OpenAI chat choices, vLLM ``/generate``). Each case says which completion an
entry must get, or that it must be dropped or marked ambiguous — never a neighbour's.
"""

from __future__ import annotations

import pytest
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from transformers import AutoTokenizer

from hermes_replay import bundled_tokenizer_path
from hermes_replay._runner.plain_attrib import attribute, candidates_of

QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(bundled_tokenizer_path()))


def _chat(texts: list[str], seq: int = 0) -> tuple[int, dict]:
    return seq, {"status": 200, "body": {"choices": [
        {"index": k, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
        for k, t in enumerate(texts)]}}


def _group(tok, entries: list[tuple[str, float]], messages: bool = False) -> dict:
    group: dict = {"tokens": [], "masks": [], "scores": []}
    if messages:
        group["messages"] = []
    for text, score in entries:
        conv = [*QUESTION, {"role": "assistant", "content": text}]
        out = tokenize_for_trainer(tok, conv)
        group["tokens"].append(out["tokens"])
        group["masks"].append(out["masks"])
        group["scores"].append(score)
        if messages:
            group["messages"].append(conv)
    return group


def _owners(found) -> list[int | None]:
    return [u.entry for u in found.units]


def test_reordered_entries_find_their_completions_by_decoded_tokens(tok):
    replies = ["The sum is 5.", "I think it is 6.", "Five: 2 plus 3 = 5.", "No idea, sorry."]
    order = [2, 0, 3, 1]
    group = _group(tok, [(replies[k], float(k)) for k in order])
    found = attribute(group, candidates_of([_chat(replies)]), tok)
    # completion k is held by the entry at the position where k landed; its score is k
    assert [group["scores"][e] for e in _owners(found)] == [0.0, 1.0, 2.0, 3.0]
    assert {u.how for u in found.units} == {"text"} and not found.unmatched_entries


def test_a_reply_inside_a_longer_one_is_not_taken_for_it(tok):
    replies = ["5", "5 is the answer, because 2 + 3 = 5"]
    group = _group(tok, [(replies[1], 1.0), (replies[0], 0.0)])
    found = attribute(group, candidates_of([_chat(replies)]), tok)
    assert _owners(found) == [1, 0]


def test_dropped_entries_leave_their_completions_without_a_score(tok):
    replies = ["first reply, kept", "second reply, filtered", "third reply, kept"]
    group = _group(tok, [(replies[2], 0.3), (replies[0], 0.7)])
    found = attribute(group, candidates_of([_chat(replies)]), tok)
    assert _owners(found) == [1, None, 0]


def test_identical_replies_with_equal_scores_are_fine_and_unequal_ones_ambiguous(tok):
    replies = ["same words", "same words", "other words"]
    agree = _group(tok, [(replies[0], 1.0), (replies[2], 0.0), (replies[0], 1.0)])
    found = attribute(agree, candidates_of([_chat(replies)]), tok)
    assert _owners(found) == [0, 2, 1] and not any(u.ambiguous for u in found.units)
    disagree = _group(tok, [(replies[0], 1.0), (replies[2], 0.0), (replies[0], 0.5)])
    found = attribute(disagree, candidates_of([_chat(replies)]), tok)
    assert [u.ambiguous for u in found.units] == [True, True, False]


def test_an_entry_matching_no_completion_is_counted_not_given_away(tok):
    replies = ["alpha beta gamma", "delta epsilon zeta"]
    group = _group(tok, [("something else entirely, 12345 qwerty", 1.0), (replies[1], 0.0)])
    found = attribute(group, candidates_of([_chat(replies)]), tok)
    assert _owners(found) == [None, 1] and found.unmatched_entries == [0]


def test_a_trimmed_reply_is_matched_to_the_clearly_closest_completion(tok):
    replies = ["<think>long musing about numbers</think> The answer is 5, since 2+3 is five.",
               "<think>short</think> I would say 7, honestly, but unsure."]
    trimmed = [r.split("</think>")[1] + " (trimmed)" for r in replies]  # the env rewrote them
    group = _group(tok, [(trimmed[1], 0.0), (trimmed[0], 1.0)], messages=True)
    found = attribute(group, candidates_of([_chat(replies)]), tok)
    assert _owners(found) == [1, 0] and {u.how for u in found.units} == {"close text"}


def test_token_ids_of_a_generate_reply_match_exactly(tok):
    texts = ["2 + 3 = 5", "2 + 3 = 6"]
    ids = [tok.encode(t, add_special_tokens=False) for t in texts]
    body = {"text": texts, "finish_reasons": ["stop", "stop"], "token_ids": ids}
    prompt = tok.encode("What is 2 + 3?", add_special_tokens=False)
    group = {"tokens": [prompt + ids[1], prompt + ids[0]], "masks": [[-100] * len(prompt)
             + ids[1], [-100] * len(prompt) + ids[0]], "scores": [0.0, 1.0]}
    found = attribute(group, candidates_of([(0, {"body": body})]), tok)
    assert _owners(found) == [1, 0] and {u.how for u in found.units} == {"tokens"}


def test_multi_turn_entries_hold_their_own_turns(tok):
    # two rollouts, two turns each, one request per turn (n=1): the group's four requests
    turns = {"a": ["A opens with the knight.", "A castles on move two."],
             "b": ["B pushes the pawn.", "B resigns at once."]}
    answers = [_chat([turns["a"][0]], 0), _chat([turns["b"][0]], 1),
               _chat([turns["a"][1]], 2), _chat([turns["b"][1]], 3)]
    group = {"scores": [0.0, 1.0], "messages": [
        [*QUESTION, *({"role": "assistant", "content": t} for t in turns["b"])],
        [*QUESTION, *({"role": "assistant", "content": t} for t in turns["a"])]]}
    found = attribute(group, candidates_of(answers), tok)
    assert [(u.entry, [c.seq for c in u.candidates]) for u in found.units] == [
        (1, [0, 2]), (0, [1, 3])]


def test_no_readable_completion_falls_back_to_position_and_says_so(tok):
    group = _group(tok, [("x y z", 1.0), ("p q r", 0.0)])
    streamed = [(0, {"status": 200, "chunks": ["data: {}"]})]
    found = attribute(group, candidates_of(streamed), tok)
    assert found.by_position and _owners(found) == [0, 1]
    assert {u.how for u in found.units} == {"position"}
