"""One HTML file: styles, plotly.js, the data and the page script all inline.

The page is safe to open from anywhere: its Content-Security-Policy forbids every request
(``default-src 'none'``; inline scripts and styles only, images only as ``data:``), so even a
bug could not make it fetch anything, and the data is embedded as JSON that cannot end its
``<script>`` element (``<``, ``>`` and ``&`` are escaped as ``\\u003c`` …).
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

__all__ = ["GENERATOR", "render_page"]

GENERATOR = "hermes-replay report"
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; font-src data:; connect-src 'none'; form-action 'none'; "
       "base-uri 'none'")
_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)


def _static(name: str) -> str:
    return (resources.files("hermes_replay._report") / "static" / name).read_text("utf-8")


def _inline_js(code: str) -> str:
    """JavaScript that cannot close its ``<script>`` element early."""
    return _SCRIPT_END.sub(r"<\\/\1", code).replace("<!--", "<\\!--")


def state_json(state: dict[str, Any]) -> str:
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_page(state: dict[str, Any], plotly_js: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="generator" content="{GENERATOR}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(state["title"])}</title>
<style>{_static("report.css")}</style>
</head>
<body>
<header id="head"></header>
<main>
<div id="sections"></div>
<section class="card" id="rollouts-card">
<h2>Rollouts</h2>
<div class="controls">
<input type="search" id="filter" placeholder="filter: rollout id, group, status">
<label><input type="checkbox" id="only-changed"> only changed, new or missed</label>
<span id="shown" class="meta"></span>
</div>
<div class="table-wrap"><table id="rollouts"><thead><tr></tr></thead><tbody></tbody></table></div>
</section>
<section class="card" id="transcript" hidden></section>
</main>
<script type="text/plain" id="plotly-js">{_inline_js(plotly_js)}</script>
<script type="application/json" id="report-state">{state_json(state)}</script>
<script>{_inline_js(_static("report.js"))}</script>
</body>
</html>
"""
