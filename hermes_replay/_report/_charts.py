"""The report's charts, made with plotly (the ``report`` extra).

Why plotly: it is maintained, it builds a figure as plain JSON from Python, and it ships its
whole JavaScript library inside the Python package (``plotly.offline.get_plotlyjs()``), so the
page inlines it and opens with no network — hover, zoom and click work in a file on disk.
(Vega-Altair inlines its JS only through the vl-convert-python binary; bokeh can inline its
JS too but brings numpy, pillow and tornado; matplotlib draws static images, no hover/click.)

Importing this module raises ``ReportExtraMissing`` when plotly is not installed.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_replay._report._extra import ReportExtraMissing

__all__ = ["ReportExtraMissing", "plotly_js", "section_charts"]

try:
    import plotly
    import plotly.graph_objects as go
except ImportError as exc:  # raised to the caller, with the install command
    raise ReportExtraMissing("plotly") from exc

_BEFORE, _AFTER = "#9aa5b1", "#2f6fde"
_LAYOUT = {"template": "plotly_white", "height": 300,
           "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
           "legend": {"orientation": "h", "y": 1.12, "x": 0}}


def plotly_js() -> str:
    """plotly.js as shipped inside the Python package (inlined once per page)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _fig_json(fig: Any) -> dict[str, Any]:
    return json.loads(fig.to_json())


def _rewards_figure(title: str, rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    fig = go.Figure()
    series = [("before", "before", _BEFORE), ("reward", "after" if compared else "reward",
                                                _AFTER)] if compared else \
        [("reward", "reward", _AFTER)]
    every = [r[k] for r in rows for k, _, _ in series if r[k] is not None]
    # the usual reward range [0, 1] stays in view, so one run's charts compare by eye
    lo, hi = min([0.0, *every]), max([1.0, *every])
    size = (hi - lo) / 20 or 0.05
    for key, name, color in series:
        values = [r[key] for r in rows if r[key] is not None]
        fig.add_trace(go.Histogram(
            x=values, name=f"{name} (n={len(values)})", marker_color=color, opacity=0.65,
            xbins={"start": lo - size / 2, "end": hi + size / 2, "size": size},
            hovertemplate="reward %{x}: %{y} rollouts<extra></extra>"))
    fig.update_layout(**_LAYOUT, barmode="overlay", title={"text": "reward distribution"},
                      xaxis_title="reward", yaxis_title="rollouts",
                      xaxis_range=[lo - size, hi + size])
    return _fig_json(fig)


def _groups_figure(title: str, rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    """Per GRPO group, the spread of its rollouts' rewards (what the advantage is made of)."""
    fig = go.Figure()
    series = [("before", "before", _BEFORE), ("reward", "after", _AFTER)] if compared else \
        [("reward", "reward", _AFTER)]
    for key, name, color in series:
        kept = [r for r in rows if r[key] is not None]
        fig.add_trace(go.Box(
            x=[str(r["group"] or "?") for r in kept], y=[r[key] for r in kept], name=name,
            marker_color=color, boxpoints="all", jitter=0.4, pointpos=0,
            customdata=[r["key"] for r in kept], text=[r["id"] for r in kept],
            hovertemplate="%{text}<br>reward %{y}<extra></extra>"))
    fig.update_layout(**_LAYOUT, boxmode="group" if compared else "overlay",
                      title={"text": "per-group spread (click a point for its transcript)"},
                      xaxis_title="group", yaxis_title="reward")
    if len({r["group"] for r in rows}) > 40:  # group ids would overprint each other
        fig.update_xaxes(showticklabels=False)
    return _fig_json(fig)


def section_charts(title: str, rows: list[dict[str, Any]], *, compared: bool
                   ) -> dict[str, Any]:
    return {"rewards": _rewards_figure(title, rows, compared),
            "groups": _groups_figure(title, rows, compared),
            "plotly_version": plotly.__version__}
