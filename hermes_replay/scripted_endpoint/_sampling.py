"""Seeded, reproducible "sampling" for the scripted endpoint.

How a sample is chosen (the contract tests rely on):

* Each request body is reduced to a canonical key: the JSON body without volatile fields (``n``,
  ``stream``, ``stream_options``, ``logprobs``, ``top_logprobs``, ``user``, …), keys sorted.
* The endpoint counts samples already drawn per key. A request asking for ``n`` choices gets
  sample indices ``k, k+1, …, k+n-1`` where ``k`` is that count. So eight identical requests (the
  members of a GRPO group sent one by one) and one request with ``n=8`` see the same eight samples,
  all different, in a fixed order.
* Sample ``j`` uses ``random.Random(sha256(seed, "content", j, key))``; two fresh endpoints with the
  same seed therefore answer identically, request for request.
* ``temperature == 0`` is greedy: every sample index is 0, so every answer is the same. A missing
  temperature counts as 1 (the OpenAI default), i.e. sampling.
* Latency uses its own ``Random`` (seeded from ``seed``) drawn in arrival order, and logprobs use
  ``Random(sha256(seed, "logprobs", j, key))``, so neither changes what the script answers.

Concurrent identical requests get indices in arrival order: the set of answers is fixed, which
request gets which one is not.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from typing import Any

VOLATILE_FIELDS = frozenset(
    {
        "n",
        "stream",
        "stream_options",
        "logprobs",
        "top_logprobs",
        "user",
        "echo",
        "return_logprob",
        "return_text_in_logprobs",
        "prompt_logprobs",
        "request_id",
        "rid",
    }
)


def canonical_key(path: str, body: dict[str, Any]) -> str:
    """The request with volatile fields removed, as stable JSON (prefixed by the path)."""
    cleaned = {k: v for k, v in body.items() if k not in VOLATILE_FIELDS}
    params = cleaned.get("sampling_params")
    if isinstance(params, dict):  # SGLang keeps n and friends one level down
        cleaned["sampling_params"] = {
            k: v for k, v in params.items() if k not in VOLATILE_FIELDS
        }
    return path + "\n" + json.dumps(cleaned, sort_keys=True, separators=(",", ":"), default=str)


def derived_rng(seed: int, purpose: str, index: int, key: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\0{purpose}\0{index}\0{key}".encode()).hexdigest()
    return random.Random(digest)


class Sampler:
    """Hands out sample indices per canonical key (thread-safe) and draws latencies."""

    def __init__(self, seed: int, latency: tuple[float, float]) -> None:
        low, high = latency
        if low < 0 or high < low:
            raise ValueError(f"latency must be (min_s, max_s) with 0 <= min <= max, got {latency}")
        self.seed = seed
        self.latency = (float(low), float(high))
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._drawn: dict[str, int] = {}
            self._latency_rng = random.Random(f"latency:{self.seed}")

    def indices(self, key: str, n: int, greedy: bool) -> list[int]:
        if greedy:
            return [0] * n
        with self._lock:
            start = self._drawn.get(key, 0)
            self._drawn[key] = start + n
        return list(range(start, start + n))

    def next_latency(self) -> float:
        low, high = self.latency
        if high <= 0:
            return 0.0
        with self._lock:
            return self._latency_rng.uniform(low, high)

    def content_rng(self, key: str, index: int) -> random.Random:
        return derived_rng(self.seed, "content", index, key)

    def logprob_values(self, key: str, index: int, count: int) -> list[float]:
        """Deterministic per-token logprobs (all <= 0) for sample ``index``."""
        rng = derived_rng(self.seed, "logprobs", index, key)
        return [round(-abs(rng.gauss(0.0, 0.6)), 6) for _ in range(count)]


def is_greedy(temperature: Any) -> bool:
    try:
        return temperature is not None and float(temperature) == 0.0
    except (TypeError, ValueError):
        return False
