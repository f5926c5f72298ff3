"""What a finished run must look like: pure checks over its output files and recorded requests.

Kept apart from running anything so each check is a plain function of data (tests feed it
hand-made groups, metrics and requests). Every check returns ``(severity, message)`` pairs; an
empty list means it passed. Messages say where (group, sequence, token index) so a user can go
straight to the bad rollout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_replay._runner.plain_attrib import is_placeholder

Problem = tuple[str, str]  # (severity "fail"|"warn", message)
MASK = -100
_HEADER_MAX_TOKENS = 8  # "<|im_start|>" + role + "\n" fits in a few tokens for any ChatML vocab


@dataclass
class Vocab:
    """Just enough of a tokenizer to check tokens and roles (tests pass fakes)."""

    size: int
    im_start: int | None  # None: not a ChatML template, per-role mask check is skipped
    decode: Any  # Callable[[list[int]], str]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> Vocab:
        im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
        if im_start is None or im_start == tokenizer.unk_token_id:
            im_start = None
        return cls(len(tokenizer), im_start, lambda ids: tokenizer.decode(ids))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_unit(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and 0.0 <= value <= 1.0)


def _is_finite(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def check_groups(groups: Sequence[dict[str, Any]], vocab: Vocab | None,
                 unit: bool = True) -> list[Problem]:
    """Tokens are ints in the vocabulary, masks align, -100 off-assistant, scores in [0, 1]
    (``unit``: the Hermes layer's rule) or, for a plain env, finite numbers (a trainer takes
    any; a NaN or an infinity poisons the batch's advantages)."""
    if not groups:
        return [("fail", "the JSONL has no scored group: process produced nothing to train on "
                         "(every group dropped? see the run's log)")]
    problems: list[Problem] = []
    placeholders = 0
    for g, group in enumerate(groups):
        tokens, masks, scores = group.get("tokens"), group.get("masks"), group.get("scores")
        where = f"group {g}"
        if not (isinstance(tokens, list) and isinstance(masks, list) and isinstance(scores, list)):
            problems.append(("fail", f"{where}: tokens, masks and scores must all be lists"))
            continue
        if not len(tokens) == len(masks) == len(scores):
            problems.append(("fail", f"{where}: {len(tokens)} token sequences, {len(masks)} "
                                     f"mask sequences, {len(scores)} scores; one per rollout"))
        for s, score in enumerate(scores):
            if unit and not _is_unit(score):
                problems.append(("fail", f"{where} rollout {s}: score {score!r} is not in [0, 1]"))
            elif not unit and not _is_finite(score):
                problems.append(("fail", f"{where} rollout {s}: score {score!r} is not a finite "
                                         "number: a trainer's advantages become NaN"))
        for s, (seq, mask) in enumerate(zip(tokens, masks, strict=False)):
            if is_placeholder(seq, mask):  # atroposlib's DummyManagedServer
                placeholders += 1
                continue
            problems += _check_sequence(f"{where} rollout {s}", seq, mask, vocab)
    if placeholders:
        problems.append(("warn", f"{placeholders} rollout(s) carry atroposlib's placeholder tokens "
                                 "and masks (its DummyManagedServer: an OpenAI-type server gives "
                                 "no token data), not training data; the token and mask rules "
                                 "apply where tokens are real — record with --server-type "
                                 "vllm|sglang for those"))
    return problems




def _check_sequence(where: str, seq: Any, mask: Any, vocab: Vocab | None) -> list[Problem]:
    if not isinstance(seq, list) or not isinstance(mask, list):
        return [("fail", f"{where}: tokens and masks must be lists of ints")]
    bad = next((i for i, t in enumerate(seq) if not _is_int(t)), None)
    if bad is not None:
        return [("fail", f"{where}: token {bad} is {seq[bad]!r}, not an int (placeholder "
                         "tokens?)")]
    if vocab is not None:
        out = next((i for i, t in enumerate(seq) if not 0 <= t < vocab.size), None)
        if out is not None:
            return [("fail", f"{where}: token {out} is id {seq[out]}, outside the tokenizer's "
                             f"vocabulary (0..{vocab.size - 1}): tokens from another tokenizer?")]
    if len(mask) != len(seq):
        return [("fail", f"{where}: {len(seq)} tokens but {len(mask)} mask entries")]
    wrong = next((i for i, (t, m) in enumerate(zip(seq, mask, strict=True))
                  if m != MASK and m != t), None)
    if wrong is not None:
        return [("fail", f"{where}: mask {wrong} is {mask[wrong]!r}; a mask entry is -100 or the "
                         f"token id itself ({seq[wrong]})")]
    if all(m == MASK for m in mask):
        return [("warn", f"{where}: every mask is -100, nothing of this rollout is trained on "
                         "(no assistant output?)")]
    if vocab is None or vocab.im_start is None:
        if mask and mask[0] != MASK:
            return [("fail", f"{where}: the first token is trained on; the prompt must be -100")]
        return []
    return _check_roles(where, seq, mask, vocab)


def _check_roles(where: str, seq: list[int], mask: list[int], vocab: Vocab) -> list[Problem]:
    """Split at <|im_start|>; only assistant bodies (not their header) may be trained on."""
    starts = [i for i, t in enumerate(seq) if t == vocab.im_start]
    if not starts:
        return [("warn", f"{where}: no <|im_start|> in the tokens; per-role mask check skipped")]
    first_trained = next(i for i, m in enumerate(mask) if m != MASK)
    if first_trained < starts[0]:
        return [("fail", f"{where}: token {first_trained} (before the first message) is trained "
                         "on; it must be -100")]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(seq)
        role, body = _role(seq, start, end, vocab)
        trained = [i for i in range(start, end) if mask[i] != MASK]
        if not trained:
            continue
        if role != "assistant":
            return [("fail", f"{where}: token {trained[0]} is trained on but belongs to a "
                             f"{role or 'unlabelled'!s} message; masks must be -100 on every "
                             "non-assistant token")]
        if trained[0] < body:
            return [("fail", f"{where}: token {trained[0]} of the assistant header "
                             "(<|im_start|>assistant) is trained on; it is the prompt, not output")]
    return []


def _role(seq: list[int], start: int, end: int, vocab: Vocab) -> tuple[str, int]:
    """(role name, index of the first body token) of the message starting at ``start``."""
    for stop in range(start + 2, min(end, start + 1 + _HEADER_MAX_TOKENS) + 1):
        text = vocab.decode(seq[start + 1:stop])
        if "\n" in text:
            return text.split("\n", 1)[0].strip(), stop
    return "", start + 1


def check_eval_dir(out_dir: Path) -> list[Problem]:
    """evaluate wrote metrics.json with at least one metric (and, ideally, samples)."""
    metrics_file = out_dir / "metrics.json"
    if not metrics_file.is_file():
        return [("fail", f"evaluate wrote no metrics.json in {out_dir}: call `await self."
                         "evaluate_log(metrics=..., samples=...)` at the end of evaluate()")]
    try:
        data = json.loads(metrics_file.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [("fail", f"{metrics_file} is not JSON: {exc}")]
    results = data.get("results") if isinstance(data, dict) else None
    values = [v for block in (results or {}).values() if isinstance(block, dict)
              for v in block.values()]
    if not values:
        return [("fail", f"{metrics_file} holds no metric: evaluate_log was called with an "
                         "empty metrics dict")]
    if not (out_dir / "samples.jsonl").is_file():
        return [("warn", "evaluate wrote no samples.jsonl: pass samples=[...] to evaluate_log "
                         "so eval rollouts can be read back")]
    return []


def check_eval_requests(requests: Iterable[dict[str, Any]]) -> list[Problem]:
    """The eval requests came from the agent loop: tools offered, tool results fed back."""
    requests = list(requests)
    if not requests:
        return [("warn", "the cassette shows no request inside an eval rollout, so tool use "
                         "could not be verified: evaluate probably runs HermesAgentLoop outside "
                         "a rollout scope; `await self.run_eval_rollouts(items)` gives every "
                         "eval rollout its own identity (and exact replay)")]
    chats = [r for r in requests if str(r.get("url", "")).endswith("/chat/completions")]
    if not chats:
        return [("warn", "no chat request was recorded for evaluate (a completions/generate "
                         "server?), so tool use could not be verified")]
    with_tools = [r for r in chats if (r.get("body") or {}).get("tools")]
    if not with_tools:
        return [("fail", f"none of evaluate's {len(chats)} chat requests offered tools: "
                         "evaluate did not run the agent loop with tools")]
    fed_back = any(m.get("role") == "tool" for r in with_tools
                   for m in (r.get("body") or {}).get("messages") or [] if isinstance(m, dict))
    if not fed_back:
        return [("warn", "no eval request carried a tool result: the model never called a tool "
                         "(the loop ran, but tool use was not exercised)")]
    return []


def check_rewards(rewards: Sequence[tuple[str, Any]]) -> list[Problem]:
    """``(where, reward)`` pairs: all in [0, 1], and not all the same."""
    if not rewards:
        return [("fail", "the run produced no rewards to check")]
    bad = [(w, r) for w, r in rewards if not _is_unit(r)]
    if bad:
        shown = ", ".join(f"{w}: {r!r}" for w, r in bad[:3])
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return [("fail", f"{len(bad)} reward(s) outside [0, 1]: {shown}{more}")]
    values = {float(r) for _w, r in rewards}
    if len(rewards) < 2:
        return [("warn", "only one reward: cannot tell whether rewards vary")]
    if len(values) == 1:
        return [("warn", f"all {len(rewards)} rewards are {values.pop()}: the reward does not "
                         "discriminate between rollouts (atroposlib drops such groups)")]
    return []


def check_plain_rewards(rewards: Sequence[tuple[str, Any]],
                        groups: Sequence[dict[str, Any]]) -> list[Problem]:
    """A plain env's rewards, judged by what is wrong for any trainer: a NaN or an infinity,
    and groups whose scores are all equal (atroposlib's ``ensure_scores_are_not_same`` filter
    drops them in ``serve``: no signal). A range is not judged — GRPO-style rewards of −0.5 …
    1.1 are as good as [0, 1]."""
    if not rewards:
        return [("fail", "the run produced no rewards to check")]
    bad = [(w, r) for w, r in rewards if not _is_finite(r)]
    if bad:
        shown = ", ".join(f"{w}: {r!r}" for w, r in bad[:3])
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return [("fail", f"{len(bad)} reward(s) are not finite numbers: {shown}{more}; a "
                         "trainer's advantages become NaN")]
    scored = [(g, group.get("scores")) for g, group in enumerate(groups)
              if isinstance(group.get("scores"), list) and len(group["scores"]) > 1]
    constant = [g for g, scores in scored if len({float(s) for s in scores}) == 1]
    if scored and len(constant) == len(scored):
        return [("fail", f"every group's scores are all the same ({len(scored)} group(s)): "
                         "atroposlib's identical-score filter (ensure_scores_are_not_same, on "
                         "in serve) drops each one, so a trainer gets nothing from this env")]
    if constant:
        shown = ", ".join(f"group {g}" for g in constant[:5])
        return [("warn", f"{len(constant)} of {len(scored)} group(s) scored all the same "
                         f"({shown}): atroposlib's identical-score filter drops them in serve")]
    return []


def sample_rewards(samples: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
    """``reward`` (or ``score``) of each eval sample, where the env wrote one."""
    out = []
    for n, sample in enumerate(samples):
        for key in ("reward", "score"):
            if key in sample:
                out.append((f"eval sample {n}", sample[key]))
                break
    return out
