"""The tool-result budget: huge tool output goes to a file in the sandbox, the model gets a preview.

A tool result longer than its tool's threshold (``BudgetConfig.resolve_threshold``) is written to
``.tool_results/<call id>.txt`` in the rollout's sandbox and replaced, in the conversation, by a
short note naming that file plus the first ``preview_size`` characters. When the results of one
turn together are longer than ``turn_budget``, the largest remaining ones are persisted first
until the turn fits. ``read_file`` results are never persisted: it is the tool that reads a
persisted result back, so persisting it could loop forever.

Built by ``HermesAgentEnvConfig.build_budget_config()`` from ``default_result_size_chars``,
``turn_budget_chars``, ``preview_size_chars`` and ``tool_result_overrides``, and applied by
``HermesAgentLoop(budget_config=...)``. The file name comes from the tool call id, which the
loop keeps deterministic, so the preview text — part of the next model request — is the same
when a rollout is replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hermes_replay import HermesReplayError

__all__ = ["NEVER_PERSISTED", "BudgetConfig", "apply_budget", "preview_text"]

#: tools whose results are never persisted (see the module docstring)
NEVER_PERSISTED = frozenset({"read_file"})
RESULTS_DIR = ".tool_results"


@dataclass(frozen=True)
class BudgetConfig:
    """Immutable thresholds, in characters. ``tool_overrides`` maps tool name → threshold."""

    default_result_size: int = 100_000
    turn_budget: int = 200_000
    preview_size: int = 1_500
    tool_overrides: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("default_result_size", "turn_budget", "preview_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"BudgetConfig.{name} must be a non-negative int, not {value!r}")
        bad = {k: v for k, v in self.tool_overrides.items()
               if not isinstance(v, int) or isinstance(v, bool) or v < 0}
        if bad:
            raise ValueError(f"tool_result_overrides must map tool names to non-negative ints; "
                             f"got {bad!r}")
        # a read-only copy: the caller's dict may change later, this object must not
        object.__setattr__(self, "tool_overrides", MappingProxyType(dict(self.tool_overrides)))

    def resolve_threshold(self, tool_name: str) -> float:
        """Characters above which a result of ``tool_name`` is persisted (inf = never)."""
        if tool_name in NEVER_PERSISTED:
            return math.inf
        return self.tool_overrides.get(tool_name, self.default_result_size)


def preview_text(content: str, saved_as: str | None, preview_size: int, error: str = "") -> str:
    """What the model reads instead of a persisted result."""
    if saved_as is not None:
        head = (f"[tool result too large: {len(content)} characters, saved to {saved_as}; "
                f"read it with read_file or terminal (e.g. sed -n, grep). "
                f"First {min(preview_size, len(content))} characters:]")
    else:
        head = (f"[tool result too large: {len(content)} characters; it could not be saved "
                f"({error}). First {min(preview_size, len(content))} characters:]")
    return f"{head}\n{content[:preview_size]}"


def apply_budget(results: list[tuple[str, str, str]], budget: BudgetConfig,
                 persist: Callable[[str, str], str]) -> list[str]:
    """Apply ``budget`` to one turn's ``(call_id, tool_name, content)`` results, in order.

    ``persist(relative_path, content)`` writes a file in the sandbox and returns the path the
    model should use; if it raises, the result is still replaced by a preview (the conversation
    must not grow past the budget) and the note says why it was not saved.
    """
    out = [content for _, _, content in results]
    done = [False] * len(results)

    def shrink(i: int) -> None:
        call_id, _name, content = results[i]
        try:
            saved: str | None = persist(f"{RESULTS_DIR}/{_file_name(call_id, i)}", content)
            error = ""
        except HermesReplayError:
            raise  # a replay miss is the harness's to report, not a sandbox failure
        except Exception as exc:  # a sandbox that cannot write still gets a bounded turn
            saved, error = None, f"{type(exc).__name__}: {exc}"
        out[i] = preview_text(content, saved, budget.preview_size, error)
        done[i] = True

    for i, (_, name, content) in enumerate(results):
        if len(content) > budget.resolve_threshold(name):
            shrink(i)
    # the turn budget: largest first, only results that may be persisted and would shrink
    candidates = sorted(
        (i for i, (_, name, content) in enumerate(results)
         if not done[i] and name not in NEVER_PERSISTED and len(content) > budget.preview_size),
        key=lambda i: -len(results[i][2]))
    for i in candidates:
        if sum(len(c) for c in out) <= budget.turn_budget:
            break
        shrink(i)
    return out


def _file_name(call_id: str, index: int) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in call_id).strip(".")
    return f"{safe or f'call_{index}'}.txt"


def budget_from_fields(fields: Any) -> BudgetConfig:
    """``BudgetConfig`` from an object with the four ``HermesAgentEnvConfig`` budget fields."""
    return BudgetConfig(
        default_result_size=fields.default_result_size_chars,
        turn_budget=fields.turn_budget_chars,
        preview_size=fields.preview_size_chars,
        tool_overrides=dict(fields.tool_result_overrides or {}),
    )
