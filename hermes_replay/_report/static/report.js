/* hermes-replay report: renders the JSON state embedded in this page.
 * Every text that came from a cassette is set with textContent (never as markup): a cassette
 * is data from outside. No request leaves the page (see the Content-Security-Policy). */
"use strict";
(function () {
  performance.mark("report-start");
  const S = JSON.parse(document.getElementById("report-state").textContent);
  const str = (i) => (i === null || i === undefined ? "" : S.strings[i]);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const fmt = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(3));
  const fmtDelta = (x) => (x === null || x === undefined ? "" : (x > 0 ? "+" : "") + Number(x).toFixed(3));
  const yesNo = (x) => (x === null || x === undefined ? "–" : x ? "yes" : "no");

  /* ----------------------------------------------------------------- header and sections */
  function renderHeader() {
    const head = document.getElementById("head");
    head.append(el("h1", { text: S.title }));
    const meta = el("p", { class: "meta" }, "generated " + S.generated + " · hermes-replay " + S.version);
    head.append(meta);
    const rows = S.rows;
    // a reward that moved counts as changed even when its row shows a miss
    const changed = S.sections.reduce((n, sec) => n + sec.summary.changed, 0);
    const misses = rows.reduce((n, r) => n + r.misses, 0);
    const badges = el("p", { class: "badges" },
      el("span", { class: "badge", id: "count-rollouts", text: rows.length + " rollouts" }),
      el("span", { class: "badge", text: S.sections.length + " run(s)" }),
      S.compared ? el("span", { class: "badge" + (changed ? " warn" : " ok"), id: "count-changed", text: changed + " changed" }) : null,
      el("span", { class: "badge" + (misses ? " bad" : ""), id: "count-misses", text: misses + " misses" }));
    head.append(badges);
  }

  function metricTable(title, pairs) {
    if (!pairs.length) return null;
    // before/after columns only when both sides reported metrics (a recording has none)
    const compared = pairs.some((p) => p[1] !== null) && pairs.some((p) => p[2] !== null);
    const head = compared ? ["metric", "before", "after", "Δ"] : ["metric", "value"];
    const table = el("table", { class: "small" }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))));
    const body = el("tbody");
    for (const [name, after, before] of pairs) {
      const show = (v) => (typeof v === "number" ? Number(v).toPrecision(4) : v === null ? "–" : String(v));
      const cells = compared
        ? [name, show(before), show(after), typeof after === "number" && typeof before === "number" ? fmtDelta(after - before) : ""]
        : [name, show(after !== null ? after : before)];
      body.append(el("tr", {}, ...cells.map((c) => el("td", { text: c }))));
    }
    table.append(body);
    // long metric lists start folded, so the charts and the rollouts stay in view
    return el("details", { class: "metrics", open: pairs.length <= 8 }, el("summary", { text: title + " (" + pairs.length + ")" }), table);
  }

  /* Charts are drawn when they scroll into view: plotly takes tens of milliseconds per chart,
   * and a report of many environments should open at once. */
  const pending = new Map();
  function drawChart(div) {
    const fig = pending.get(div);
    if (!fig || !window.Plotly) return;
    pending.delete(div);
    Plotly.newPlot(div, fig.data, fig.layout, { displaylogo: false, responsive: true }).then(() => {
      div.dataset.drawn = "1";
    });
    div.on("plotly_click", (ev) => {
      const point = ev && ev.points && ev.points[0];
      if (point && typeof point.customdata === "string") openRollout(point.customdata);
    });
  }
  const observer = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
    for (const entry of entries) if (entry.isIntersecting) { observer.unobserve(entry.target); drawChart(entry.target); }
  }, { rootMargin: "200px" }) : null;

  function renderSections() {
    const root = document.getElementById("sections");
    S.sections.forEach((sec, si) => {
      const sum = sec.summary;
      const card = el("section", { class: "card", id: "section-" + si });
      card.append(el("h2", { text: sec.title }));
      card.append(el("p", { class: "meta", text: "run: " + sec.run + (sec.baseline ? "  ·  compared with: " + sec.baseline : "") }));
      const facts = [sum.rollouts + " rollouts", "mean reward " + fmt(sum.mean)];
      if (sec.baseline) facts.push("before " + fmt(sum.mean_before), sum.changed + " changed");
      facts.push(sum.misses + " misses");
      if (sum.unused) facts.push(sum.unused + " recordings unused");
      card.append(el("p", { class: "facts", text: facts.join(" · ") }));
      for (const note of sec.notes) card.append(el("p", { class: "note", text: note }));
      const charts = el("div", { class: "charts" });
      for (const name of ["rewards", "groups"]) {
        const fig = sec.charts[name];
        const div = el("div", { class: "chart", id: "chart-" + si + "-" + name });
        charts.append(div);
        if (fig) pending.set(div, fig);
      }
      card.append(charts);
      const tables = el("div", { class: "tables" },
        metricTable("eval metrics", sec.metrics),
        metricTable("wandb metrics (captured)", sec.wandb));
      if (tables.childNodes.length) card.append(tables);
      root.append(card);
    });
  }

  /* plotly.js (4.8 MB) is parsed after the first paint, so the table and the transcripts are
   * usable at once; it sits in the page as inert text until then. */
  function loadCharts() {
    const source = document.getElementById("plotly-js");
    if (source && !window.Plotly) {
      const script = document.createElement("script");
      script.textContent = source.textContent;
      document.head.append(script);
    }
    for (const div of pending.keys()) observer ? observer.observe(div) : drawChart(div);
    performance.mark("report-charts");
    document.body.dataset.charts = window.Plotly ? "1" : "missing";
  }

  /* ----------------------------------------------------------------- the rollouts table */
  const columns = [];
  if (S.sections.length > 1) columns.push({ key: "section", label: "env · mode", value: (r) => S.sections[r.section].title });
  columns.push(
    { key: "id", label: "rollout" });
  // the item's name beside the id, when the env's items have one (ids stay the identity)
  if (S.rows.some((r) => r.label)) columns.push({ key: "label", label: "item" });
  columns.push(
    { key: "phase", label: "phase" },
    { key: "group", label: "group" },
    // a plain env's reward that is not plainly the rollout's own (dropped, ambiguous, by
    // position) says so in its cell, as `show` and the snapshots do
    { key: "reward", label: "reward", num: true, show: (v, r) => fmt(v) + (r.note ? " (" + r.note + ")" : "") });
  if (S.compared) {
    columns.push({ key: "before", label: "before", num: true, show: fmt });
    columns.push({ key: "delta", label: "Δ reward", num: true, show: fmtDelta });
  }
  columns.push(
    { key: "turns", label: "turns", num: true },
    { key: "calls", label: "tool calls", num: true },
    { key: "errors", label: "tool errors", num: true },
    { key: "finished", label: "finished", show: yesNo },
    { key: "misses", label: "misses / drift", num: true, show: (v, r) => (v ? v + " miss" + (v > 1 ? "es" : "") : "") + (r.drift ? (v ? " · " : "") + r.drift : "") },
    { key: "status", label: "status" });
  const view = { sort: null, dir: 1, filter: "", onlyChanged: false };

  function cellValue(col, r) {
    return col.value ? col.value(r) : r[col.key];
  }

  function renderTableHead() {
    const tr = document.querySelector("#rollouts thead tr");
    columns.forEach((col) => {
      const th = el("th", { "data-key": col.key, class: col.num ? "num" : "", title: "sort by " + col.label, onclick: () => {
        view.dir = view.sort === col.key ? -view.dir : col.num ? -1 : 1;
        view.sort = col.key;
        renderTableBody();
      } }, col.label);
      tr.append(th);
    });
    document.getElementById("filter").addEventListener("input", (ev) => { view.filter = ev.target.value.toLowerCase(); renderTableBody(); });
    const only = document.getElementById("only-changed");
    if (!S.compared && !S.rows.some((r) => r.misses)) only.parentElement.hidden = true;
    only.addEventListener("change", (ev) => { view.onlyChanged = ev.target.checked; renderTableBody(); });
  }

  function renderTableBody() {
    let rows = S.rows;
    if (view.filter) rows = rows.filter((r) => (r.id + " " + (r.label || "") + " " + (r.group || "") + " " + r.status + " " + S.sections[r.section].title).toLowerCase().includes(view.filter));
    if (view.onlyChanged) rows = rows.filter((r) => r.status && r.status !== "same");
    if (view.sort) {
      const col = columns.find((c) => c.key === view.sort);
      rows = rows.slice().sort((a, b) => {
        const x = cellValue(col, a), y = cellValue(col, b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * view.dir;
      });
    }
    for (const th of document.querySelectorAll("#rollouts thead th")) {
      th.classList.toggle("sorted", th.dataset.key === view.sort);
      th.classList.toggle("desc", th.dataset.key === view.sort && view.dir < 0);
    }
    const body = document.querySelector("#rollouts tbody");
    const frag = document.createDocumentFragment();
    for (const r of rows) {
      const tr = el("tr", { "data-key": r.key, class: "st-" + (r.status || "none").replace(" ", "-"), onclick: () => openRollout(r.key) });
      for (const col of columns) {
        const v = cellValue(col, r);
        tr.append(el("td", { class: (col.num ? "num " : "") + "c-" + col.key, text: col.show ? col.show(v, r) : v === null || v === undefined ? "–" : String(v) }));
      }
      frag.append(tr);
    }
    body.replaceChildren(frag);
    document.getElementById("shown").textContent = rows.length + " of " + S.rows.length + " shown";
  }

  /* ----------------------------------------------------------------- one transcript */
  function preview(text, n) {
    const line = String(text || "").replace(/\s+/g, " ").trim();
    return line.length > n ? line.slice(0, n - 1) + "…" : line;
  }

  function pretty(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
  }

  function tokensView(tok) {
    const trained = [...tok.trained].filter((c) => c === "1").length;
    const box = el("details", { class: "tokens" }, el("summary", { text: "training tokens: " + tok.ids.length + " (" + trained + " trained, " + (tok.ids.length - trained) + " masked)" + (tok.logprobs ? " · logprobs on hover" : "") }));
    box.addEventListener("toggle", () => {
      if (!box.open || box.dataset.drawn) return;
      box.dataset.drawn = "1";
      box.append(el("p", { class: "legend" }, el("span", { class: "tok t1", text: "trained" }), " ", el("span", { class: "tok t0", text: "masked (-100)" })));
      const flow = el("div", { class: "toks" });
      tok.ids.forEach((id, i) => {
        // positions the model did not generate carry a placeholder (atroposlib uses 1.0)
        const raw = tok.logprobs ? tok.logprobs[i] : undefined;
        const lp = typeof raw === "number" && raw <= 0 ? raw : undefined;
        const t = tok.trained[i] === "1";
        const title = "token " + id + " · " + (t ? "trained" : "masked") + (lp !== undefined ? " · logprob " + lp : "");
        flow.append(el("span", { class: "tok " + (t ? "t1" : "t0"), title: title, "data-logprob": lp, text: S.vocab[String(id)] ?? "<" + id + ">" }));
      });
      box.append(flow);
    });
    return box;
  }

  /* The tool calls the cassette recorded: the agent's, and the ones compute_reward made
   * (no message shows those). */
  function recordedTools(tools) {
    const byReward = tools.filter((t) => t.source !== "agent").length;
    const failed = tools.filter((t) => t.error).length;
    const box = el("details", { class: "recorded-tools", open: byReward > 0 || failed > 0 },
      el("summary", { text: "recorded tool calls: " + tools.length + (byReward ? " (" + byReward + " by the reward)" : "") + (failed ? " · " + failed + " failed" : "") }));
    for (const t of tools) {
      box.append(el("details", { class: "msg role-tool" + (t.error ? " tool-error" : "") + (t.source !== "agent" ? " by-reward" : "") },
        el("summary", {}, "#" + t.seq + " " + t.name + " · " + (t.source === "agent" ? "agent, turn " + (t.turn + 1) : t.source) + " ",
          t.error ? el("span", { class: "badge bad", text: t.error }) : null,
          t.origin ? el("span", { class: "badge", text: t.origin === "rescored" ? "re-scored offline in the recorded workspace" : "run again to rebuild the world" }) : null,
          el("span", { class: "preview", text: preview(str(t.args), 80) })),
        el("pre", { text: "arguments: " + pretty(str(t.args)) + "\n\nresult: " + pretty(str(t.result)) })));
    }
    return box;
  }

  function openRollout(key) {
    const row = S.rows.find((r) => r.key === key);
    const data = S.transcripts[key];
    const panel = document.getElementById("transcript");
    if (!row || !data) return;
    for (const tr of document.querySelectorAll("#rollouts tr.open")) tr.classList.remove("open");
    const tr = document.querySelector('#rollouts tr[data-key="' + CSS.escape(key) + '"]');
    if (tr) tr.classList.add("open");
    if (location.hash !== "#r=" + encodeURIComponent(key)) history.replaceState(null, "", "#r=" + encodeURIComponent(key));
    const facts = ["reward " + fmt(row.reward)];
    if (S.compared) facts.push("before " + fmt(row.before), "Δ " + (fmtDelta(row.delta) || "–"));
    facts.push("turns " + (row.turns ?? "–"), "tool calls " + row.calls, "tool errors " + (row.errors ?? "–"), "finished " + yesNo(row.finished));
    if (row.parts) facts.push("reward parts: " + row.parts);  // the env's named terms of the reward
    if (row.note) facts.push("reward " + row.note);
    const out = [el("h2", { id: "transcript-title", text: "rollout " + row.id + (row.label ? " (" + row.label + ")" : "") }),
      el("p", { class: "meta", text: S.sections[row.section].title + (row.group ? " · group " + row.group : "") + " · " + row.phase }),
      el("p", { class: "facts", text: facts.join(" · ") })];
    for (const miss of data.misses) {
      out.push(el("div", { class: "miss-box" }, el("strong", { text: "replay miss" + (miss.seq !== null ? " at turn " + (miss.seq + 1) : "") }), el("pre", { text: miss.text })));
    }
    if (data.diverge) {
      // turn null: a tool call the reward made differs (it answers no turn)
      const where = data.diverge.turn === null ? "first difference: in the reward" : "first diverging turn: " + (data.diverge.turn + 1);
      out.push(el("div", { class: "diverge-box" }, el("strong", { text: where + " (" + data.diverge.field + ")" }), data.diverge.diff ? el("pre", { text: data.diverge.diff }) : null));
    }
    // turns are shown counted from 1 (turn = seq + 1), as every hermes-replay message counts
    const missTurns = new Set(data.misses.map((m) => m.seq));
    let marked = false;
    for (const m of data.messages) {
      if (m.thread) out.push(el("p", { class: "thread", text: "another conversation in this rollout (e.g. a judge call)" }));
      const cls = ["msg", "role-" + m.role];
      const badges = [];
      if (m.turn !== undefined && missTurns.has(m.turn)) { cls.push("miss"); badges.push(el("span", { class: "badge bad", text: "miss at turn " + (m.turn + 1) })); }
      if (data.diverge && m.turn === data.diverge.turn && !marked) { cls.push("diverge"); marked = true; badges.push(el("span", { class: "badge warn", id: "diverge-mark", text: "first divergence: " + data.diverge.field })); }
      const title = m.role === "tool" ? "tool result · " + m.tool : m.role + (m.turn !== undefined ? " · turn " + (m.turn + 1) : "");
      if (m.role === "tool") {
        if (m.error) cls.push("tool-error");
        out.push(el("details", { class: cls.join(" ") }, el("summary", {}, title, " ", m.error ? el("span", { class: "badge bad", text: "error: " + m.error }) : null, ...badges, el("span", { class: "preview", text: preview(str(m.text), 90) })), el("pre", { text: pretty(str(m.text)) })));
        continue;
      }
      const box = el("div", { class: cls.join(" ") }, el("div", { class: "who" }, title, ...badges));
      if (m.reasoning !== undefined) box.append(el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }), el("pre", { text: str(m.reasoning) })));
      if (m.text !== undefined) box.append(el("pre", { class: "text", text: str(m.text) }));
      for (const call of m.calls || []) {
        box.append(el("details", { class: "call" }, el("summary", {}, "→ tool call " + call.name + " ", el("span", { class: "preview", text: preview(str(call.args), 90) })), el("pre", { text: (call.id ? "id " + call.id + "\n" : "") + pretty(str(call.args)) })));
      }
      out.push(box);
    }
    if (!data.messages.length) out.push(el("p", { class: "meta", text: "no transcript: this input holds rewards only" }));
    if (data.tools && data.tools.length) out.push(recordedTools(data.tools));
    if (data.tokens) out.push(tokensView(data.tokens));
    panel.replaceChildren(...out);
    panel.hidden = false;
    panel.scrollIntoView({ block: "start" });
  }

  renderHeader();
  renderSections();
  renderTableHead();
  renderTableBody();
  const wanted = decodeURIComponent((location.hash.match(/^#r=(.*)$/) || [])[1] || "");
  if (wanted) openRollout(wanted);
  window.hermesReport = { openRollout: openRollout, state: S };
  performance.mark("report-ready");
  document.body.dataset.ready = "1";
  requestAnimationFrame(() => setTimeout(loadCharts, 0));
})();
