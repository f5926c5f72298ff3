"""The report's charts, made with plotly (the ``report`` extra).

Why plotly: it is maintained, it builds a figure as plain JSON from Python, and it ships its
whole JavaScript library inside the Python package (``plotly.offline.get_plotlyjs()``), so the
page inlines it and opens with no network — hover, zoom and click work in a file on disk.
(Vega-Altair inlines its JS only through the vl-convert-python binary; bokeh can inline its
JS too but brings numpy, pillow and tornado; matplotlib draws static images, no hover/click.)

Importing this module raises ``ReportExtraMissing`` when plotly is not installed.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from hermes_replay._report._extra import ReportExtraMissing

__all__ = ["ReportExtraMissing", "plotly_js", "section_charts"]

try:
    import plotly
    import plotly.io
    import plotly.io.json
except ImportError as exc:  # raised to the caller, with the install command
    raise ReportExtraMissing("plotly") from exc

_BEFORE, _AFTER = "#9aa5b1", "#2f6fde"
_MARGIN = {"l": 50, "r": 20, "t": 40, "b": 40}
_LEGEND = {"orientation": "h", "y": 1.12, "x": 0}


def plotly_js() -> str:
    """plotly.js as shipped inside the Python package (inlined once per page)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@functools.cache
def _template() -> dict[str, Any]:
    """The ``plotly_white`` template as plotly.js reads it, made once per process: expanding
    it was most of what a ``go.Figure`` cost (tens of milliseconds a chart, seconds a
    corpus). Shared by every figure; nothing here mutates it."""
    return json.loads(plotly.io.json.to_json_plotly(plotly.io.templates["plotly_white"]))


def _figure(data: list[dict[str, Any]], **layout: Any) -> dict[str, Any]:
    figure = _strict({"data": data, "layout": {"height": 300, "margin": dict(_MARGIN),
                                                "legend": dict(_LEGEND), **layout}})
    figure["layout"]["template"] = _template()
    return figure


def _strict(value: Any) -> Any:
    """NaN and infinities as ``null``, as plotly's own JSON encoder writes them (the page's
    JSON allows neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_strict(v) for v in value]
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    return value


# The figures are written as the JSON plotly.js draws (its figure schema), not built through
# ``plotly.graph_objects``: that validates and copies every property, and made the charts
# most of a report's cost. A test builds each figure with plotly's own classes as well and
# requires the same JSON.

def _rewards_figure(title: str, rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    series = [("before", "before", _BEFORE), ("reward", "after" if compared else "reward",
                                                _AFTER)] if compared else \
        [("reward", "reward", _AFTER)]
    every = [r[k] for r in rows for k, _, _ in series if r[k] is not None]
    # the usual reward range [0, 1] stays in view, so one run's charts compare by eye
    lo, hi = min([0.0, *every]), max([1.0, *every])
    size = (hi - lo) / 20 or 0.05
    data = []
    for key, name, color in series:
        values = [r[key] for r in rows if r[key] is not None]
        data.append({"hovertemplate": "reward %{x}: %{y} rollouts<extra></extra>",
                     "marker": {"color": color}, "name": f"{name} (n={len(values)})",
                     "opacity": 0.65, "x": values,
                     "xbins": {"end": hi + size / 2, "size": size, "start": lo - size / 2},
                     "type": "histogram"})
    return _figure(data, barmode="overlay", title={"text": "reward distribution"},
                   xaxis={"title": {"text": "reward"}, "range": [lo - size, hi + size]},
                   yaxis={"title": {"text": "rollouts"}})


def _groups_figure(title: str, rows: list[dict[str, Any]], compared: bool) -> dict[str, Any]:
    """Per GRPO group, the spread of its rollouts' rewards (what the advantage is made of)."""
    series = [("before", "before", _BEFORE), ("reward", "after", _AFTER)] if compared else \
        [("reward", "reward", _AFTER)]
    data = []
    for key, name, color in series:
        kept = [r for r in rows if r[key] is not None]
        data.append({"boxpoints": "all", "customdata": [r["key"] for r in kept],
                     "hovertemplate": "%{text}<br>reward %{y}<extra></extra>", "jitter": 0.4,
                     "marker": {"color": color}, "name": name, "pointpos": 0,
                     "text": [r["id"] for r in kept],
                     "x": [str(r["group"] or "?") for r in kept], "y": [r[key] for r in kept],
                     "type": "box"})
    xaxis: dict[str, Any] = {"title": {"text": "group"}}
    if len({r["group"] for r in rows}) > 40:  # group ids would overprint each other
        xaxis["showticklabels"] = False
    return _figure(data, boxmode="group" if compared else "overlay",
                   title={"text": "per-group spread (click a point for its transcript)"},
                   xaxis=xaxis, yaxis={"title": {"text": "reward"}})


def section_charts(title: str, rows: list[dict[str, Any]], *, compared: bool
                   ) -> dict[str, Any]:
    return {"rewards": _rewards_figure(title, rows, compared),
            "groups": _groups_figure(title, rows, compared),
            "plotly_version": plotly.__version__}
