"""The report's charts are written as plotly.js figure JSON by hand (``_report._charts``), for
speed; here each one is built a second time through plotly's own validated classes
(``plotly.graph_objects``), and the two must be the same JSON — so a property plotly would
reject, rename or coerce differently fails here, not silently in a reader's browser."""

from __future__ import annotations

import json
import math
from typing import Any

import plotly.graph_objects as go
import pytest

from hermes_replay._report import _charts

LAYOUT = {"template": "plotly_white", "height": 300,
          "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
          "legend": {"orientation": "h", "y": 1.12, "x": 0}}


def _validated(fig: go.Figure) -> dict[str, Any]:
    return json.loads(fig.to_json())


def _rewards_by_plotly(rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    fig = go.Figure()
    series = [("before", "before", _charts._BEFORE), ("reward", "after", _charts._AFTER)] \
        if compared else [("reward", "reward", _charts._AFTER)]
    every = [r[k] for r in rows for k, _, _ in series if r[k] is not None]
    lo, hi = min([0.0, *every]), max([1.0, *every])
    size = (hi - lo) / 20 or 0.05
    for key, name, color in series:
        values = [r[key] for r in rows if r[key] is not None]
        fig.add_trace(go.Histogram(
            x=values, name=f"{name} (n={len(values)})", marker_color=color, opacity=0.65,
            xbins={"start": lo - size / 2, "end": hi + size / 2, "size": size},
            hovertemplate="reward %{x}: %{y} rollouts<extra></extra>"))
    fig.update_layout(**LAYOUT, barmode="overlay", title={"text": "reward distribution"},
                      xaxis_title="reward", yaxis_title="rollouts",
                      xaxis_range=[lo - size, hi + size])
    return _validated(fig)


def _groups_by_plotly(rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    fig = go.Figure()
    series = [("before", "before", _charts._BEFORE), ("reward", "after", _charts._AFTER)] \
        if compared else [("reward", "reward", _charts._AFTER)]
    for key, name, color in series:
        kept = [r for r in rows if r[key] is not None]
        fig.add_trace(go.Box(
            x=[str(r["group"] or "?") for r in kept], y=[r[key] for r in kept], name=name,
            marker_color=color, boxpoints="all", jitter=0.4, pointpos=0,
            customdata=[r["key"] for r in kept], text=[r["id"] for r in kept],
            hovertemplate="%{text}<br>reward %{y}<extra></extra>"))
    fig.update_layout(**LAYOUT, boxmode="group" if compared else "overlay",
                      title={"text": "per-group spread (click a point for its transcript)"},
                      xaxis_title="group", yaxis_title="reward")
    if len({r["group"] for r in rows}) > 40:
        fig.update_xaxes(showticklabels=False)
    return _validated(fig)


def _row(i: int, reward: float | None, before: float | None = None,
         group: str | None = "g") -> dict[str, Any]:
    return {"reward": reward, "before": before, "group": group, "key": f"k{i}", "id": f"r{i}"}


CASES = {
    "one run": ([_row(0, 0.5), _row(1, 1.0, group="h"), _row(2, None)], False),
    "compared": ([_row(0, 0.25, 0.5), _row(1, 1.0, None), _row(2, None, 0.75)], True),
    "outside 0..1": ([_row(0, -3.5), _row(1, 12.0, group=None)], False),
    "one value": ([_row(0, 0.0)], False),
    "non-finite": ([_row(0, math.nan), _row(1, math.inf, -math.inf), _row(2, 0.5)], True),
    "many groups": ([_row(i, i / 50, group=f"group-{i}") for i in range(50)], False),
}


@pytest.mark.parametrize("case", CASES)
def test_each_chart_is_the_json_plotlys_own_classes_make(case: str) -> None:
    rows, compared = CASES[case]
    charts = _charts.section_charts("t", rows, compared=compared)
    assert charts["rewards"] == _rewards_by_plotly(rows, compared)
    assert charts["groups"] == _groups_by_plotly(rows, compared)
    assert charts["groups"]["data"] and charts["rewards"]["data"]


def test_a_figure_can_be_changed_without_changing_the_next() -> None:
    first = _charts.section_charts("t", [_row(0, 0.5)], compared=False)
    first["rewards"]["layout"]["margin"]["l"] = 0
    first["rewards"]["layout"]["legend"]["x"] = 9
    second = _charts.section_charts("t", [_row(0, 0.5)], compared=False)
    assert second["rewards"] == _rewards_by_plotly([_row(0, 0.5)], False)
