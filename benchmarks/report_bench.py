"""The HTML report at 1,000 rollouts: file size, build time, and how fast the page is usable.

    .venv/bin/python benchmarks/report_bench.py            # 1,000 rollouts × 10 turns
    .venv/bin/python benchmarks/report_bench.py --rollouts 100 --rounds 1   # smoke run

Two cassettes of synthetic GRPO traffic (``_synthetic``: 10-turn tool-calling rollouts in
groups of 8) — a recording and a re-recording where a tenth of the rewards moved and a tenth of
the rollouts answer differently at some turn — then ``write_report(after, against=before)``,
the heaviest report (transcripts, divergences, overlaid charts).

In Debian's headless Chromium, side by side in one browser (ABAB, ``--rounds`` pairs):
the report, and the floor — a page holding only the same inlined plotly.js. Times come from
the page's own marks: ``ready`` (table drawn, page usable), ``charts`` (plotly parsed and the
visible charts drawn); then a sort of the 1,000-row table and the opening of a transcript.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "hermes_replay"))

from _browser import CHROMIUM_ARGS, chromium_path

from benchmarks._synthetic import MODEL, build_traffic
from hermes_replay import write_report
from hermes_replay._cassette import CassetteHeader, Interaction, write_cassette

URL = "http://127.0.0.1:8000/v1/chat/completions"


def _cassette(path: Path, rollouts: list, *, seed: int, changed: float) -> None:
    rng = random.Random(seed)
    interactions, outcomes = [], {}
    for ro in rollouts:
        drift_at = rng.randrange(len(ro.requests)) if rng.random() < changed else None
        for seq, (body, reply) in enumerate(zip(ro.requests, ro.responses, strict=True)):
            reply = json.loads(json.dumps(reply))
            if drift_at is not None and seq == drift_at:
                reply["choices"][0]["message"]["content"] = "a different answer"
            interactions.append(Interaction(
                rollout=ro.id, seq=seq, kind="chat",
                request={"method": "POST", "url": URL, "headers": {}, "body": body},
                response={"status": 200, "headers": {}, "body": reply}))
        base = random.Random(ro.id).random()
        reward = base if rng.random() >= changed else rng.random()
        outcomes[ro.id] = {"reward": round(reward, 3), "turns_used": len(ro.requests),
                           "finished_naturally": True, "tool_errors": 0, "phase": "train",
                           "group": f"item-{ro.group}"}
    header = CassetteHeader(env_name="synthetic", model=MODEL, command=["process"])
    write_cassette(path, header, interactions, outcomes)


_MEASURE = """async () => {
  const marks = Object.fromEntries(performance.getEntriesByType('mark')
      .map(m => [m.name, m.startTime]));
  const th = document.querySelector("#rollouts thead th[data-key='reward']");
  let t = performance.now(); th.click(); const sort = performance.now() - t;
  const rows = hermesReport.state.rows, key = rows[Math.floor(rows.length / 2)].key;
  t = performance.now(); hermesReport.openRollout(key); const open = performance.now() - t;
  return {ready: marks['report-ready'], charts: marks['report-charts'], sort, open,
          rows: document.querySelectorAll('#rollouts tbody tr').length,
          heap: performance.memory ? performance.memory.usedJSHeapSize : null};
}"""


def _load(browser, page_path: Path, floor: bool) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(page_path.as_uri())
    if floor:
        page.wait_for_function("window.Plotly !== undefined")
        out = {"charts": page.evaluate(
            "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")}
    else:
        page.wait_for_selector("body[data-charts='1']", timeout=120_000)
        out = page.evaluate(_MEASURE)
    out["wall"] = (time.perf_counter() - start) * 1000
    page.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="report-bench-"))
    traffic = build_traffic(args.rollouts * 10, turns=10, group=8)
    before, after = tmp / "before.jsonl", tmp / "after.jsonl"
    _cassette(before, traffic, seed=1, changed=0.0)
    _cassette(after, traffic, seed=2, changed=0.1)
    print(f"{len(traffic)} rollouts × 10 turns; cassettes {before.stat().st_size / 1e6:.1f} MB "
          f"each")

    t0, c0 = time.perf_counter(), time.process_time()
    report = write_report(after, tmp / "report.html", against=before)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    html = report.read_text(encoding="utf-8")
    start = html.index('id="report-state">') + len('id="report-state">')
    state_bytes = len(html[start:html.index("</script>", start)].encode())
    plotly_start = html.index('id="plotly-js">') + len('id="plotly-js">')
    plotly_bytes = len(html[plotly_start:html.index("</script>", plotly_start)].encode())
    size = report.stat().st_size
    print(f"report: {size / 1e6:.2f} MB = data {state_bytes / 1e6:.2f} MB + plotly.js "
          f"{plotly_bytes / 1e6:.2f} MB + page; built in {wall:.2f} s wall, {cpu:.2f} s CPU")
    floor = tmp / "floor.html"
    plotly_js = html[plotly_start:html.index("</script>", plotly_start)]
    floor.write_text(f"<!DOCTYPE html><html><head><script>{plotly_js}</script></head>"
                     "<body></body></html>", encoding="utf-8")

    from playwright.sync_api import sync_playwright

    runs: dict[str, list[dict]] = {"report": [], "floor": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for _ in range(args.rounds):  # A B B A: a burst of load hits both
            for name in ("report", "floor", "floor", "report"):
                runs[name].append(_load(browser, report if name == "report" else floor,
                                        name == "floor"))
        browser.close()
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0] if rs[0][k] is not None}
           for name, rs in runs.items()}
    r, f = med["report"], med["floor"]
    print(f"page usable (table of {int(r['rows'])} rows drawn): {r['ready']:.0f} ms after "
          "navigation start")
    print(f"charts drawn: {r['charts']:.0f} ms; floor (plotly.js alone parsed): "
          f"{f['charts']:.0f} ms; ratio {r['charts'] / f['charts']:.2f}×")
    print(f"sort {int(r['rows'])} rows: {r['sort']:.0f} ms; open a transcript: {r['open']:.0f} ms; "
          f"JS heap {r.get('heap', 0) / 1e6:.0f} MB")
    print(f"(medians of {args.rounds * 2} loads each, ABBA; wall incl. page creation: report "
          f"{r['wall']:.0f} ms, floor {f['wall']:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
