"""The reward snapshot's text: written from a run (``render_run``) and read back.

``hermes_replay.snapshot`` stores it (``render_run``); the pytest extension compares it, and
the main job and ``watch`` read the project's snapshot as the accepted baseline
(``_corpus/baseline.py``). One parser for all three, below both of them.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_replay._cassette.parts import parts_text
from hermes_replay._runner.result import RunResult

__all__ = ["FORMAT_LINE", "LABEL_MARK", "PARTS", "one_line", "render_run", "snapshot_labels",
           "snapshot_parts", "snapshot_table", "split_label", "without_labels"]

FORMAT_LINE = "# hermes-replay rollout snapshot v1"
LABEL_MARK = "  # "  # a row's label follows it (ids, numbers and yes/no never hold it)


def one_line(text: str) -> str:
    return " ".join(text.split())


def split_label(line: str) -> tuple[str, str | None]:
    """A snapshot row and its label (None when it has none)."""
    row, mark, label = line.partition(LABEL_MARK)
    return (row, label.strip() or None) if mark else (line, None)


def without_labels(text: str) -> str:
    """``text`` with every row's label cut: what a snapshot comparison looks at, so a
    snapshot accepted before labels existed (or one whose item was renamed) still matches."""
    return "\n".join(split_label(line)[0] if line.startswith("  ") else line
                     for line in text.split("\n"))


def snapshot_table(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """A snapshot's rollouts (id -> [reward, turns, finished, tool errors]) and metrics."""
    rollouts: dict[str, list[str]] = {}
    metrics: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        if not line.startswith("  "):
            section = line.split(":", 1)[0]
            continue
        cols = split_label(line)[0].split()
        if section == "rollouts" and cols:
            rollouts[cols[0]] = cols[1:]
        elif section.endswith("metrics") or section.startswith("wandb metrics"):
            if len(cols) >= 2:
                metrics[f"{section.split()[0]}/{cols[0]}"] = " ".join(cols[1:])
    return rollouts, metrics


PARTS = "parts: "  # in a row's note: the reward's named parts (``_cassette/parts.py``)


def _notes(text: str) -> dict[str, list[str]]:
    """Rollout id -> the pieces of its row's note (label, ``parts: …``)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        row, note = split_label(line)
        if line.startswith("  ") and note and row.split():
            out[row.split()[0]] = [piece.strip() for piece in note.split(" | ")]
    return out


def snapshot_labels(*texts: str) -> dict[str, str]:
    """Rollout id -> label, from snapshot texts (the later text's label wins)."""
    out: dict[str, str] = {}
    for text in texts:
        for rid, pieces in _notes(text).items():
            label = next((p for p in pieces if p and not p.startswith(PARTS)), None)
            if label:
                out[rid] = label
    return out


def snapshot_parts(text: str) -> dict[str, dict[str, float]]:
    """Rollout id -> its reward's named parts, from a snapshot's row notes."""
    out: dict[str, dict[str, float]] = {}
    for rid, pieces in _notes(text).items():
        for piece in pieces:
            if not piece.startswith(PARTS):
                continue
            parts: dict[str, float] = {}
            for term in piece[len(PARTS):].split(", "):
                name, _, value = term.rpartition(" ")
                try:
                    parts[name] = float(value)
                except ValueError:
                    continue
            out[rid] = parts
    return out


# Metrics that measure wall time or throughput change every run; never snapshot them.
VOLATILE_METRIC = re.compile(r"(time|duration|perf|seconds|per_sec|throughput|timestamp)", re.I)


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, dict) and value.get("_type") == "table":
        return f"table[{', '.join(value.get('columns', []))}] × {value.get('rows')} rows"
    return str(value)


def _metric_lines(metrics: dict[str, Any]) -> list[str]:
    keys = sorted(k for k in metrics if not VOLATILE_METRIC.search(k))
    width = max((len(k) for k in keys), default=0)
    return [f"  {k.ljust(width)}  {_num(metrics[k])}" for k in keys]


def render_run(result: RunResult) -> str:
    """The snapshot text of a run (also handy for printing)."""
    lines = [FORMAT_LINE, f"env: {result.env_name or '-'}", ""]
    lines.append("rollouts: id · reward · turns · finished · tool errors")
    ordered = sorted(result.rollouts, key=lambda r: r.id)
    width = max((len(r.id) for r in ordered), default=0)
    for r in ordered:
        line = (f"  {r.id.ljust(width)}  {_num(r.reward)}  {_num(r.turns)}  "
                f"{_num(r.finished)}  {_num(r.tool_errors)}")
        # the item's name, for a reader; never compared (``RolloutSnapshotExtension.matches``)
        note = " | ".join(x for x in (one_line(r.label) if r.label else "",
                                         PARTS + parts_text(r.parts) if r.parts else "") if x)
        lines.append(line + (f"{LABEL_MARK}{note}" if note else ""))
    if result.eval_metrics:
        lines += ["", "eval metrics:", *_metric_lines(result.eval_metrics)]
    if result.wandb:
        lines += ["", "wandb metrics (last value):", *_metric_lines(result.wandb)]
    return "\n".join(lines) + "\n"
