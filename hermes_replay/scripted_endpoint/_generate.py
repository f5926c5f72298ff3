"""``POST /generate`` in the two shapes atroposlib speaks: vLLM's and SGLang's.

vLLM (atroposlib ``VLLMServer``; the server is Atropos' ``example_trainer/vllm_api_server.py``)::

    request  {"prompt": {"prompt_token_ids": [int, ...]} | "text", "logprobs": 0, "n": N,
              "max_tokens": M, "temperature": T, ...sampling params...,
              "prompt_logprobs": K (only from get_logprobs)}
    response {"text": [str]*N, "prompt": str, "finish_reasons": ["stop"|"length"]*N,
              "logprobs": [[[{"<token id>": logprob}] per output token] per sample],
              "prompt_token_ids": [int, ...], "token_ids": [[int, ...]]*N,
              "prompt_logprobs": [None, {"<id>": lp, ...}, ...]   (only if requested)}

  ``logprobs``/``prompt_token_ids``/``token_ids`` are present when ``logprobs`` is not None, as
  in that server. atroposlib reads ``logprobs`` and ``finish_reasons``.

SGLang (atroposlib ``SGLangServer``)::

    request  {"input_ids": [int, ...]} or {"text": str}, "sampling_params": {"n": N,
              "max_new_tokens": M, "temperature": T, ...}, "return_logprob": true,
              "return_text_in_logprobs": false}
    response (n == 1: one object; n > 1: a list of them)
             {"text": str, "output_ids": [int, ...],
              "meta_info": {"id": str, "prompt_tokens": P, "completion_tokens": C,
                            "cached_tokens": 0,
                            "finish_reason": {"type": "stop", "matched": <eos id>}
                                           | {"type": "length", "length": M},
                            "output_token_logprobs": [[logprob, token_id, text|None], ...],
                            "input_token_logprobs": [[logprob|None, token_id, text|None], ...]}}

The prompt ids are decoded with the project tokenizer, the ChatML is parsed back into a
conversation, the script answers, and the reply is rendered as raw text (tool calls in the
endpoint's ``raw_tool_format``) and tokenized; stop answers end with the EOS token, as a model's do.
"""

from __future__ import annotations

from typing import Any

from hermes_replay.scripted_endpoint import _tokens
from hermes_replay.scripted_endpoint._engine import Engine, Sample
from hermes_replay.scripted_endpoint._openai import text_conversation


def prompt_texts(prompt: Any) -> list[str]:
    """``/v1/completions`` prompt → list of prompt strings (token-id prompts are decoded)."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, int) for p in prompt):
        return [_tokens.require_tokenizer().decode(prompt)]
    if isinstance(prompt, list) and prompt:
        return [p if isinstance(p, str) else _tokens.require_tokenizer().decode(p) for p in prompt]
    raise ValueError("'prompt' must be a string, a list of strings or a list of token ids")


def handle(engine: Engine, path: str, body: dict[str, Any]) -> Any:
    if "sampling_params" in body or "input_ids" in body or "text" in body:
        return _sglang(engine, path, body)
    return _vllm(engine, path, body)


def _eos_id(tok: Any) -> int:
    eos = tok.eos_token_id
    if eos is None:
        eos = tok.convert_tokens_to_ids("<|im_end|>")
    return int(eos)


def _output_ids(tok: Any, sample: Sample, max_tokens: int | None) -> tuple[list[int], str]:
    ids = list(tok.encode(sample.raw_text, add_special_tokens=False))
    if sample.finish_reason != "length":
        ids.append(_eos_id(tok))
    if max_tokens is not None and len(ids) > max_tokens:
        return ids[:max_tokens], "length"
    return ids, "length" if sample.finish_reason == "length" else "stop"


def _run(engine: Engine, path: str, body: dict[str, Any], prompt_ids: list[int],
         params: dict[str, Any]) -> tuple[str, list[tuple[Sample, list[int], str]]]:
    tok = _tokens.require_tokenizer()
    prompt = tok.decode(prompt_ids)
    n = int(params.get("n") or 1)
    conv = text_conversation(prompt, params, path)
    # Truncation happens on token ids below, so the engine must not cut the text first.
    conv.params = {**params, "max_tokens": None}
    out = []
    for sample in engine.run(path, body, conv, n):
        ids, finish = _output_ids(tok, sample, params.get("max_tokens"))
        out.append((sample, ids, finish))
    return prompt, out


def _vllm(engine: Engine, path: str, body: dict[str, Any]) -> dict[str, Any]:
    tok = _tokens.require_tokenizer()
    raw_prompt = body.get("prompt")
    if isinstance(raw_prompt, dict):
        prompt_ids = [int(i) for i in raw_prompt.get("prompt_token_ids") or []]
    elif isinstance(raw_prompt, str):
        prompt_ids = list(tok.encode(raw_prompt, add_special_tokens=False))
    else:
        raise ValueError("vLLM /generate needs 'prompt' (text or {'prompt_token_ids': [...]})")
    params = {k: body.get(k) for k in ("temperature", "n", "max_tokens", "model")}
    prompt, results = _run(engine, path, body, prompt_ids, params)
    response: dict[str, Any] = {
        "text": [tok.decode(ids, skip_special_tokens=True) for _, ids, _ in results],
        "prompt": prompt,
        "finish_reasons": [finish for _, _, finish in results],
    }
    if body.get("logprobs") is not None:
        lps = [engine.sampler.logprob_values(s.key, s.sample_index, len(ids))
               for s, ids, _ in results]
        response["logprobs"] = [
            [[{str(t): lp}] for t, lp in zip(ids, values, strict=True)]
            for (_, ids, _), values in zip(results, lps, strict=True)
        ]
        response["prompt_token_ids"] = prompt_ids
        response["token_ids"] = [ids for _, ids, _ in results]
    if body.get("prompt_logprobs") is not None:
        response["prompt_logprobs"] = _prompt_logprobs(
            engine, body, prompt_ids, int(body["prompt_logprobs"]), len(tok)
        )
    return response


def _prompt_logprobs(engine: Engine, body: dict[str, Any], prompt_ids: list[int], top_k: int,
                     vocab: int) -> list[dict[str, float] | None]:
    from hermes_replay.scripted_endpoint._sampling import canonical_key

    values = engine.sampler.logprob_values(canonical_key("prompt", body), 0, len(prompt_ids))
    out: list[dict[str, float] | None] = [None]  # vLLM has no logprob for the first token
    for token, lp in zip(prompt_ids[1:], values[1:], strict=True):
        entry = {str(token): lp}
        for r in range(1, max(1, top_k)):
            entry.setdefault(str((token + r) % vocab), round(lp - r, 6))
        out.append(entry)
    return out


def _sglang(engine: Engine, path: str, body: dict[str, Any]) -> Any:
    tok = _tokens.require_tokenizer()
    if body.get("input_ids") is not None:
        prompt_ids = [int(i) for i in body["input_ids"]]
    elif isinstance(body.get("text"), str):
        prompt_ids = list(tok.encode(body["text"], add_special_tokens=False))
    else:
        raise ValueError("SGLang /generate needs 'input_ids' or 'text'")
    sp = dict(body.get("sampling_params") or {})
    params = {"temperature": sp.get("temperature"), "n": sp.get("n"),
              "max_tokens": sp.get("max_new_tokens"), "model": body.get("model")}
    _, results = _run(engine, path, body, prompt_ids, params)
    want_lp = bool(body.get("return_logprob"))
    with_text = bool(body.get("return_text_in_logprobs"))
    eos = _eos_id(tok)
    items = []
    for sample, ids, finish in results:
        meta: dict[str, Any] = {
            "id": f"scripted-{sample.sample_index}-{abs(hash(sample.key)) % 10**12}",
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "finish_reason": (
                {"type": "stop", "matched": eos} if finish == "stop"
                else {"type": "length", "length": len(ids)}
            ),
        }
        if want_lp:
            values = engine.sampler.logprob_values(sample.key, sample.sample_index, len(ids))
            meta["output_token_logprobs"] = [
                [lp, t, tok.decode([t]) if with_text else None]
                for t, lp in zip(ids, values, strict=True)
            ]
            meta["input_token_logprobs"] = [
                [None if i == 0 else -1.0, t, tok.decode([t]) if with_text else None]
                for i, t in enumerate(prompt_ids)
            ]
        items.append({
            "text": tok.decode(ids, skip_special_tokens=True),
            "output_ids": ids,
            "meta_info": meta,
        })
    return items[0] if len(items) == 1 else items
