/* The overview's live part. Fed by /api/events (one event a second), it keeps the overview's cards
   current (every card and the status line from the same event, so they agree), draws pages/s over the
   whole crawl (/api/history, read again every few seconds while the crawl runs), lists a distributed
   crawl's nodes, and offers pause / resume / stop.
   Everything it shows is set as text, never parsed as HTML: node hosts and error messages come from
   elsewhere. No library, nothing loaded from anywhere but the dashboard. */
(() => {
  "use strict";
  const HISTORY_EVERY = 5000; // ms between two readings of the chart's history while the crawl runs
  const WIDTH = 600;
  const HEIGHT = 120;
  const SVG = "http://www.w3.org/2000/svg";
  const whole = new Intl.NumberFormat("en-US");
  const decimal = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const live = document.getElementById("live");
  const controls = document.getElementById("controls");
  let history = { start: 0, step: 1, rates: [] };
  let historyAt = 0;
  let wasLive = null;

  function element(tag, attributes = {}, text = undefined) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setText(id, text) {
    const node = document.getElementById(id);
    if (node) node.textContent = text;
  }

  function size(n) {  // decimal units, as the server-side pages write them
    const units = ["B", "kB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) {
      n /= 1000;
      i += 1;
    }
    return i === 0 ? `${Math.round(n)} B` : `${decimal.format(n)} ${units[i]}`;
  }

  function seconds(s) {  // as the server-side pages write elapsed times (web/templating.py, Format.seconds)
    if (s < 1) return `${Number((s * 1000).toPrecision(3))} ms`;
    if (s < 10) return `${Number(s.toPrecision(3))} s`;
    if (s < 60) return `${Math.round(s)} s`;
    const pad = (n) => String(n).padStart(2, "0");
    const whole = Math.floor(s);
    const hours = Math.floor(whole / 3600);
    const minutes = Math.floor((whole % 3600) / 60);
    return hours ? `${hours}h ${pad(minutes)}m ${pad(whole % 60)}s` : `${minutes}m ${pad(whole % 60)}s`;
  }

  function duration(seconds) {
    const s = Math.max(0, Math.round(seconds));
    const pad = (n) => String(n).padStart(2, "0");
    return `${Math.floor(s / 3600)}:${pad(Math.floor((s % 3600) / 60))}:${pad(s % 60)}`;
  }

  // The live section: state line, chart, queue by depth, node table.
  const stateBadge = element("span", { id: "crawl-state", class: "live-state" }, "connecting");
  const detail = element("span", { id: "live-detail", class: "muted" });
  const chart = document.createElementNS(SVG, "svg");
  chart.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
  chart.setAttribute("preserveAspectRatio", "none");
  chart.setAttribute("class", "live-chart");
  chart.setAttribute("id", "live-chart");
  chart.setAttribute("role", "img");
  chart.setAttribute("aria-label", "pages per second over time");
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("class", "live-line");
  chart.append(line);
  const scale = element("div", { class: "live-scale muted" });
  const queue = document.getElementById("queue"); // the overview's "queue by depth" table, if it has one
  const depths = element("p", { id: "live-depths", class: "muted" });
  const nodes = element("table", { id: "live-nodes", class: "live-nodes" });
  const headings = ["node", "host", "state", "partitions", "pages", "pages/s", "in flight", "heartbeat"];
  const head = element("tr");
  headings.forEach((name, i) => head.append(element("th", i > 2 ? { class: "num" } : {}, name)));
  nodes.append(element("thead"), element("tbody"));
  nodes.tHead.append(head);
  nodes.hidden = true;
  if (live) {
    const line1 = element("p", { class: "live-status" });
    line1.append(stateBadge, " ", detail);
    live.append(line1, chart, scale);
    if (!queue) live.append(depths);
    live.append(nodes);
  }

  // The controls.
  const buttons = {};
  const message = element("span", { id: "control-message", class: "muted", role: "status" });
  for (const [command, label] of [["pause", "Pause"], ["resume", "Resume"], ["stop", "Stop"]]) {
    const button = element("button", { type: "button", id: `control-${command}`, "data-command": command }, label);
    button.disabled = true;
    button.addEventListener("click", () => send(command));
    buttons[command] = button;
  }
  if (controls) controls.append(buttons.pause, buttons.resume, buttons.stop, " ", message);

  async function send(command) {
    Object.values(buttons).forEach((button) => (button.disabled = true));
    message.textContent = `${command}…`;
    try {
      const response = await fetch(`/api/control/${command}`, {
        method: "POST",
        headers: { "X-Webtrawl-Control": "1" },
        credentials: "same-origin",
      });
      const body = await response.json().catch(() => ({}));
      message.textContent = response.ok ? `${command} sent` : body.error || `refused (${response.status})`;
    } catch {
      message.textContent = "the dashboard cannot be reached";
    }
  }

  function draw() {
    const rates = history.rates;
    const top = Math.max(1, ...rates);
    const step = WIDTH / Math.max(1, rates.length - 1);
    line.setAttribute(
      "points",
      rates.map((v, i) => `${(i * step).toFixed(1)},${(HEIGHT - 4 - (v / top) * (HEIGHT - 12)).toFixed(1)}`).join(" "),
    );
    scale.textContent = rates.length
      ? `pages/s over the whole crawl, ${duration(rates.length * history.step)} in steps of ` +
        `${duration(history.step)} (top ${decimal.format(top)})`
      : "pages/s over the whole crawl: nothing fetched yet";
  }

  async function readHistory() {
    historyAt = Date.now();
    try {
      const response = await fetch("/api/history", { credentials: "same-origin" });
      if (response.ok) history = await response.json();
    } catch {
      return; // the status line says the dashboard cannot be reached
    }
    draw();
  }

  function showQueue(byDepth) {
    if (!queue) {
      depths.textContent = byDepth.length
        ? "waiting by depth: " + byDepth.map(([depth, n]) => `${depth}: ${whole.format(n)}`).join(", ")
        : "";
      return;
    }
    // Same rows as the server renders: a header row, then depth | waiting, or one "nothing waiting" row.
    while (queue.rows.length > 1) queue.deleteRow(1);
    for (const [depth, n] of byDepth) {
      const row = queue.insertRow();
      row.append(element("td", {}, depth), element("td", { class: "num" }, whole.format(n)));
    }
    if (!byDepth.length) queue.insertRow().append(element("td", { colspan: "2", class: "muted" }, "nothing waiting"));
  }

  function showNodes(list) {
    nodes.hidden = list.length === 0;
    const body = nodes.tBodies[0];
    body.replaceChildren();
    for (const node of list) {
      const row = element("tr", { "data-node": node.id, class: `node-${node.state}` });
      const age = node.heartbeat_age == null ? "" : `${decimal.format(node.heartbeat_age)} s ago`;
      const cells = [node.id, node.host, node.state, whole.format(node.partitions), whole.format(node.pages),
        decimal.format(node.pages_per_second), whole.format(node.in_flight), age];
      cells.forEach((text, i) => row.append(element("td", i > 2 ? { class: "num" } : {}, text)));
      body.append(row);
    }
  }

  function update(state) {
    const counts = state.counts;
    const crawl = state.crawl;
    for (const name of ["done", "waiting", "running", "failed"]) setText(name, whole.format(counts[name]));
    setText("pages-per-second", decimal.format(crawl.pages_per_second));
    setText("rate-label", state.live ? "pages/s" : "pages/s on average");
    setText("captures", whole.format(crawl.captures));
    setText("bytes", size(crawl.bytes));
    setText("elapsed", seconds(crawl.elapsed));
    setText("state", state.state);
    setText("remaining", state.eta_seconds == null ? "–" : duration(state.eta_seconds));
    if (live) live.dataset.state = state.state;
    stateBadge.textContent = state.state;
    stateBadge.className = `live-state live-${state.state.replace(/[^a-z]+/g, "-")}`;
    const parts = [];
    if (state.live) {
      parts.push(`${size(state.bytes_per_second)}/s`, `${whole.format(state.fetching)} in flight`);
      if (state.eta_seconds != null) parts.push(`about ${duration(state.eta_seconds)} left`);
    }
    const render = state.render || {};
    if (render.rendered || render.browser_restarts) {
      parts.push(`${whole.format(render.rendered)} rendered in ${decimal.format(render.render_seconds)} s ` +
        `(${whole.format(render.subresources)} subresources, ${whole.format(render.render_timeouts)} cut by ` +
        `the timeout, ${whole.format(render.browser_restarts)} browser restarts)`);
    }
    if (state.error) parts.push(state.error);
    detail.textContent = parts.join(" · ");
    if (state.live !== wasLive || (state.live && Date.now() - historyAt >= HISTORY_EVERY)) readHistory();
    wasLive = state.live;
    if (state.mode === "embedded") showQueue(Object.entries(counts.waiting_by_depth || {}));
    showNodes(state.nodes || []);
    buttons.pause.disabled = !(state.live && state.state === "running");
    buttons.resume.disabled = !(state.live && state.state === "paused");
    buttons.stop.disabled = !(state.live && (state.state === "running" || state.state === "paused"));
  }

  const source = new EventSource("/api/events");
  source.onmessage = (event) => update(JSON.parse(event.data));
  source.onerror = () => {
    // EventSource reconnects by itself; meanwhile nothing can be controlled.
    stateBadge.textContent = "disconnected";
    stateBadge.className = "live-state live-disconnected";
    Object.values(buttons).forEach((button) => (button.disabled = true));
  };
})();
