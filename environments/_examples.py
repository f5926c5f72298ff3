"""Shared bits of the example environments: dataset loading with a quiet offline fallback,
the seeded train/eval split, and reading answers out of ``AgentResult.messages``."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def load_items(dataset_name: str | None, split: str,
               convert: Callable[[dict[str, Any]], dict[str, Any] | None],
               builtin: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items from a HuggingFace dataset when one is configured and reachable, else ``builtin``.

    Never triggers a download when an offline variable is set; any failure (no ``datasets``
    package, no network, a schema that does not convert) falls back quietly to the samples.
    """
    if dataset_name and not any(os.environ.get(v, "") not in ("", "0") for v in _OFFLINE_VARS):
        try:
            from datasets import load_dataset

            rows = load_dataset(dataset_name, split=split)
            items = [c for c in (convert(dict(r)) for r in rows) if c]
            if items:
                return items
            logger.warning("dataset %s gave no usable rows; using built-in samples", dataset_name)
        except Exception as exc:  # offline, missing package, changed schema …
            logger.info("dataset %s not loaded (%s); using built-in samples", dataset_name, exc)
    return [dict(item) for item in builtin]


def split_items(items: list[dict[str, Any]], seed: int, eval_size: int
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Seeded shuffle, then hold out ``min(eval_size, len/3)`` items (at least one) for eval."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    n_eval = max(1, min(eval_size, len(shuffled) // 3)) if eval_size > 0 else 0
    return shuffled[n_eval:], shuffled[:n_eval]


def final_response(messages: list[dict[str, Any]]) -> str:
    """The last assistant message with text content ('' if there is none)."""
    for msg in reversed(messages):
        if msg.get("role") == "assistant" and msg.get("content"):
            return str(msg["content"])
    return ""


def tools_used(messages: list[dict[str, Any]]) -> list[str]:
    """Names of every tool the assistant called, in order."""
    names = []
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function", {}) if isinstance(tc, dict) else {}
            if fn.get("name"):
                names.append(str(fn["name"]))
    return names


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
