// genscope on the graph (docs/comfyui.md, "On the graph"): after a prompt, every node shows its
// time, peak RAM and peak VRAM (or "cached"); the slowest node and the nodes with the highest
// RAM and VRAM peaks are outlined; a panel (a sidebar tab where the frontend offers them, else
// a floating button) lists the recent runs and opens their HTML reports.
//
// Data: the websocket message `genscope.run` the package sends to the prompt's client when its
// run is finished, and GET /genscope/runs, /genscope/runs/{prompt_id}/nodes (graph.py,
// routes.py). Works with the frontends of ComfyUI v0.3.18 and of comfyui-frontend-package:
// every API is feature-detected, and a failure here never reaches ComfyUI (console warnings).

const TAG = "[genscope]";
const warned = new Set();
function warn(what, error) {
  if (warned.has(what)) return; // once per kind: a draw error would otherwise repeat per frame
  warned.add(what);
  try { console.warn(`${TAG} ${what}:`, error); } catch (_) { /* no console */ }
}

// -- formatting ------------------------------------------------------------------------------
// (tests/peers/comfyui_frontend_check.py formats the run document the same way and compares)
export function formatSeconds(ns) {
  const s = ns / 1e9;
  if (s < 0.01) return `${(s * 1000).toFixed(1)} ms`;
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 10) return `${s.toFixed(2)} s`;
  if (s < 600) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function formatBytes(bytes) {
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}

// The lines drawn under a node, and its marks.
export function nodeLines(node, run) {
  if (node.cached) return { lines: ["cached"], marks: [] };
  const first = [formatSeconds(node.duration_ns)];
  if (node.status === "failed") first.push("failed");
  else if (node.status === "skipped") first.push(node.blocked ? "blocked" : "skipped");
  const lines = [first.join(" · ")];
  const memory = [];
  if (node.peak_ram_bytes != null) memory.push(`RAM ${formatBytes(node.peak_ram_bytes)}`);
  if (node.peak_vram_bytes != null) memory.push(`VRAM ${formatBytes(node.peak_vram_bytes)}`);
  if (memory.length) lines.push(memory.join(" · "));
  const marks = [];
  if (run.slowest === node.node_id) marks.push("slowest");
  if (run.highest_ram === node.node_id) marks.push("peak RAM");
  if (run.highest_vram === node.node_id) marks.push("peak VRAM");
  return { lines, marks };
}

// -- state -----------------------------------------------------------------------------------
const state = {
  run: null,            // the figures of the last run shown (graph.py's node_figures)
  shown: {},            // node id -> {lines, marks}
  drawn: {},            // node id -> the lines last drawn on the canvas (what a person sees)
  ourPrompts: new Set(),// prompt ids this page queued (execution_start reaches only their client)
  panel: null,          // the panel's element while it is open
  mode: null,           // "sidebar" or "floating"
  canvasPass: false,    // the canvas's foreground pass draws the boxes
  errors: 0,
};

let app = null;
let api = null;

async function comfyModules() {
  const fromWindow = globalThis.comfyAPI;
  let a = fromWindow?.app?.app ?? null;
  let b = fromWindow?.api?.api ?? null;
  // Older frontends and a few newer builds only offer the module shims.
  if (!a) a = (await import("../../scripts/app.js")).app;
  if (!b) b = (await import("../../scripts/api.js")).api;
  return [a, b];
}

async function getJSON(route) {
  const response = api?.fetchApi ? await api.fetchApi(route) : await fetch(`/api${route}`);
  if (!response.ok) throw new Error(`GET ${route}: HTTP ${response.status}`);
  return response.json();
}

function apiURL(route) {
  try {
    if (api?.apiURL) return api.apiURL(route);
  } catch (e) { warn("api.apiURL", e); }
  return `/api${route}`;
}

function redraw() {
  try {
    if (app?.graph?.setDirtyCanvas) app.graph.setDirtyCanvas(true, true);
    else if (app?.canvas?.setDirty) app.canvas.setDirty(true, true);
  } catch (e) { warn("redraw", e); }
}

function findNode(id) {
  try {
    const graph = app?.rootGraph ?? app?.graph;
    if (!graph) return null;
    return graph.getNodeById?.(id) ?? graph.getNodeById?.(Number(id)) ??
      (graph._nodes || graph.nodes || []).find((n) => String(n.id) === String(id)) ?? null;
  } catch (e) {
    warn("finding a node", e);
    return null;
  }
}

// Which node of the graph shows each of the run's nodes, and what it shows: node id ->
// {lines, marks, figure}. `exists(id)` says whether the graph has that node. A node the graph
// lacks is shown on the node ComfyUI named in display_node (a group node's expansion), or on
// the subgraph node that holds it (prompt id "12:5" -> node 12); several nodes on one graph
// node are added up (time summed, peaks maximised) and marked when any of them is.
export function placeFigures(run, exists) {
  const groups = new Map();
  for (const node of run.nodes) {
    if (!node || typeof node !== "object") throw new Error("a run's node is not an object");
    let id = String(node.node_id);
    if (!exists(id)) {
      const outer = id.split(":")[0];
      if (node.display_node != null && exists(String(node.display_node))) id = String(node.display_node);
      else if (id.includes(":") && exists(outer)) id = outer;
    }
    if (!groups.has(id)) groups.set(id, []);
    groups.get(id).push(node);
  }
  const shown = {};
  for (const [id, members] of groups) {
    if (members.length === 1) {
      shown[id] = { ...nodeLines(members[0], run), figure: members[0] };
      continue;
    }
    const ran = members.filter((m) => !m.cached);
    const highest = (key) => ran.reduce((best, m) => (m[key] != null && (best == null || m[key] > best) ? m[key] : best), null);
    const figure = {
      node_id: id, members: members.map((m) => String(m.node_id)), cached: ran.length === 0,
      duration_ns: ran.reduce((sum, m) => sum + (m.duration_ns || 0), 0),
      status: ran.some((m) => m.status === "failed") ? "failed" : "ok", blocked: false,
      peak_ram_bytes: highest("peak_ram_bytes"), peak_vram_bytes: highest("peak_vram_bytes"),
    };
    const { lines } = nodeLines(figure, run);
    if (!figure.cached) lines.push(`${ran.length} of ${members.length} nodes run`);
    const marks = [["slowest", "slowest"], ["highest_ram", "peak RAM"], ["highest_vram", "peak VRAM"]]
      .filter(([key]) => members.some((m) => run[key] != null && String(m.node_id) === String(run[key])))
      .map(([, name]) => name);
    shown[id] = { lines, marks, figure };
  }
  return shown;
}

// Shows a run's figures on the graph (a malformed run changes nothing).
export function applyRun(run) {
  try {
    if (!run || !Array.isArray(run.nodes)) return;
    const shown = placeFigures(run, (id) => findNode(id) != null);
    state.run = run;
    state.shown = shown;
    state.drawn = {};
    redraw();
    refreshPanel();
  } catch (e) {
    state.errors += 1;
    warn("showing a run", e);
  }
}

export function clearRun() {
  state.run = null;
  state.shown = {};
  state.drawn = {};
  redraw();
}

// -- drawing ---------------------------------------------------------------------------------
const MARK_COLOURS = { "slowest": "#ff9f1c", "peak RAM": "#c77dff", "peak VRAM": "#4cc9f0" };
const FONT = "12px Arial, sans-serif";
const LINE = 15;

// The outline of a marked node, drawn with the node (node space: the origin is the top left of
// its body, the title above it).
// The figures belong to the nodes of the root graph: inside a subgraph, ids are the subgraph's.
function onRootGraph(graph) {
  const root = app?.rootGraph ?? app?.graph;
  return !graph || !root || graph === root;
}

function drawOutline(node, ctx) {
  if (!onRootGraph(node.graph)) return;
  const entry = state.shown[String(node.id)];
  if (!entry?.marks.length || !ctx) return;
  const collapsed = !!node.flags?.collapsed;
  const titleHeight = globalThis.LiteGraph?.NODE_TITLE_HEIGHT ?? 30;
  const width = collapsed ? (node._collapsed_width ?? 120) : node.size?.[0] ?? 140;
  const height = collapsed ? 0 : node.size?.[1] ?? 60;
  ctx.save();
  try {
    ctx.lineWidth = 3;
    ctx.strokeStyle = MARK_COLOURS[entry.marks[0]];
    ctx.strokeRect(-4, -titleHeight - 4, width + 8, height + titleHeight + 8);
  } finally {
    ctx.restore();
  }
}

// The figures under a node, in node space.
function drawBox(node, ctx) {
  const entry = state.shown[String(node.id)];
  if (!entry || !ctx) return;
  const height = node.flags?.collapsed ? 0 : node.size?.[1] ?? 60;
  const lines = entry.marks.length ? [...entry.lines, entry.marks.join(" · ")] : entry.lines;
  ctx.save();
  try {
    ctx.font = FONT;
    const boxWidth = Math.max(...lines.map((l) => ctx.measureText(l).width)) + 12;
    const top = height + 8;
    ctx.fillStyle = "rgba(20, 20, 24, 0.9)";
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(0, top, boxWidth, lines.length * LINE + 6, 4);
    else ctx.rect(0, top, boxWidth, lines.length * LINE + 6);
    ctx.fill();
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    lines.forEach((line, i) => {
      const isMarks = entry.marks.length && i === lines.length - 1;
      ctx.fillStyle = isMarks ? MARK_COLOURS[entry.marks[0]] : entry.figure?.cached ? "#9aa0a6" : "#e8e8e8";
      ctx.fillText(line, 6, top + 4 + i * LINE);
    });
    state.drawn[String(node.id)] = lines;
  } finally {
    ctx.restore();
  }
}

// Each node type draws its outline; the boxes are drawn after every node (the canvas's
// foreground pass, graph space), so that no later node covers them. Where the canvas has no
// such pass, each node draws its own box.
function hookDrawing(nodeType) {
  const proto = nodeType?.prototype;
  if (!proto || proto.__genscopeDraws) return;
  const original = proto.onDrawForeground;
  proto.onDrawForeground = function (ctx, ...rest) {
    const result = original?.apply(this, [ctx, ...rest]);
    try {
      drawOutline(this, ctx);
      if (!state.canvasPass && onRootGraph(this.graph)) drawBox(this, ctx);
    } catch (e) {
      state.errors += 1;
      warn("drawing a node's figures", e);
    }
    return result;
  };
  proto.__genscopeDraws = true;
}

function hookCanvas() {
  const canvas = app?.canvas;
  if (!canvas || canvas.__genscopeDraws) return;
  const original = canvas.onDrawForeground;
  canvas.onDrawForeground = function (ctx, ...rest) {
    const result = original?.apply(this, [ctx, ...rest]);
    try {
      state.canvasPass = true;
      if (!Object.keys(state.shown).length) return result;
      const graph = this.graph ?? app.graph;
      if (!onRootGraph(graph)) return result;
      for (const node of graph?._nodes ?? graph?.nodes ?? []) {
        if (!state.shown[String(node.id)] || !node.pos) continue;
        ctx.save();
        try {
          ctx.translate(node.pos[0], node.pos[1]);
          drawBox(node, ctx);
        } catch (e) {  // one node's figures, not the others'
          state.errors += 1;
          warn("drawing a node's figures", e);
        } finally {
          ctx.restore();
        }
      }
    } catch (e) {
      state.errors += 1;
      warn("drawing the figures", e);
    }
    return result;
  };
  canvas.__genscopeDraws = true;
}

// -- the panel -------------------------------------------------------------------------------
const PANEL_CSS = `
.genscope-panel { font: 13px Arial, sans-serif; color: var(--fg-color, #ddd); padding: 8px; }
.genscope-panel h3 { margin: 4px 0 8px; font-size: 14px; }
.genscope-panel .genscope-hint { opacity: 0.7; margin: 4px 0 8px; }
.genscope-panel .genscope-run { padding: 5px 4px; border-bottom: 1px solid #444; }
.genscope-panel .genscope-current { border-left: 3px solid #ff9f1c; }
.genscope-panel .genscope-run-head { display: flex; gap: 10px; font-weight: bold; }
.genscope-panel .genscope-run-figures { opacity: 0.85; margin: 2px 0; }
.genscope-panel a, .genscope-panel button { color: #8ab4f8; cursor: pointer; background: none; border: none; padding: 0; font: inherit; }
.genscope-panel .genscope-failed { color: #ff6b6b; }
.genscope-floating { position: fixed; right: 12px; bottom: 52px; z-index: 1000; max-height: 60vh; overflow: auto;
  background: var(--comfy-menu-bg, #202020); border: 1px solid #555; border-radius: 6px; min-width: 300px; }
.genscope-button { position: fixed; right: 12px; bottom: 12px; z-index: 1000; padding: 6px 10px; border-radius: 6px;
  background: var(--comfy-menu-bg, #202020); color: var(--fg-color, #ddd); border: 1px solid #555; cursor: pointer; }
`;

function addStyle() {
  if (document.getElementById("genscope-style")) return;
  const style = document.createElement("style");
  style.id = "genscope-style";
  style.textContent = PANEL_CSS;
  document.head.appendChild(style);
}

function startTime(utc) {
  try {
    const d = new Date(utc);
    return Number.isNaN(d.getTime()) ? "" : d.toLocaleTimeString();
  } catch (_) { return ""; }
}

async function showOnGraph(promptId) {
  try {
    applyRun(await getJSON(`/genscope/runs/${encodeURIComponent(promptId)}/nodes`));
  } catch (e) { warn("loading a run's figures", e); }
}

async function fillPanel(root) {
  root.replaceChildren();
  root.classList.add("genscope-panel");
  const title = document.createElement("h3");
  title.textContent = "genscope runs";
  root.appendChild(title);
  const hint = document.createElement("div");
  hint.className = "genscope-hint";
  const marks = state.run ? ["slowest", "highest_ram", "highest_vram"].filter((k) => state.run[k] != null) : [];
  hint.textContent = state.run
    ? `On the graph: prompt ${String(state.run.prompt_id).slice(0, 8)}` +
      (marks.length ? ` (outlined: ${marks.map((k) => ({ slowest: "slowest", highest_ram: "peak RAM", highest_vram: "peak VRAM" })[k]).join(", ")})` : "")
    : "Queue a prompt to see each node's time and memory on the graph.";
  root.appendChild(hint);
  let runs;
  try {
    runs = await getJSON("/genscope/runs");
  } catch (e) {
    const p = document.createElement("div");
    p.textContent = `genscope is not answering (${e.message}).`;
    root.appendChild(p);
    return;
  }
  const list = document.createElement("div");
  for (const run of runs.slice(0, 30)) {
    const row = document.createElement("div");
    row.className = "genscope-run";
    row.dataset.promptId = run.prompt_id;
    const head = document.createElement("div");
    head.className = "genscope-run-head";
    const when = document.createElement("span");
    when.textContent = startTime(run.start_utc) || String(run.prompt_id).slice(0, 8);
    when.title = `prompt ${run.prompt_id}`;
    const status = document.createElement("span");
    status.textContent = run.status ?? "(earlier session)";
    if (run.status && run.status !== "success") status.className = "genscope-failed";
    const time = document.createElement("span");
    time.textContent = run.duration_ns != null ? formatSeconds(run.duration_ns) : "";
    head.append(when, status, time);
    const figures = [];
    if (run.nodes_executed != null) figures.push(`${run.nodes_executed} run`, `${run.nodes_cached} cached`);
    if (run.peak_rss_bytes != null) figures.push(`RAM ${formatBytes(run.peak_rss_bytes)}`);
    if (run.peak_cuda_allocated_bytes != null) figures.push(`CUDA allocated ${formatBytes(run.peak_cuda_allocated_bytes)}`);
    const detail = document.createElement("div");
    detail.className = "genscope-run-figures";
    detail.textContent = figures.join(" · ");
    const actions = document.createElement("div");
    const report = document.createElement("a");
    report.className = "genscope-report";
    report.textContent = "report";
    report.href = apiURL(`/genscope/runs/${encodeURIComponent(run.prompt_id)}/report.html`);
    report.target = "_blank";
    report.rel = "noopener";
    const graph = document.createElement("button");
    graph.className = "genscope-show";
    graph.textContent = "on graph";
    graph.title = "show this run's figures on the nodes of the graph";
    graph.addEventListener("click", () => showOnGraph(run.prompt_id));
    actions.append(report, document.createTextNode(" · "), graph);
    row.append(head, detail, actions);
    if (state.run?.prompt_id === run.prompt_id) row.classList.add("genscope-current");
    list.appendChild(row);
  }
  root.appendChild(list);
  if (!runs.length) {
    const p = document.createElement("div");
    p.textContent = "No runs yet.";
    root.appendChild(p);
  }
}

function refreshPanel() {
  const root = state.panel;
  if (root && root.isConnected) fillPanel(root).catch((e) => warn("filling the panel", e));
}

function renderPanel(root) {
  state.panel = root;
  fillPanel(root).catch((e) => warn("filling the panel", e));
}

function addSidebarTab() {
  const manager = app?.extensionManager;
  if (typeof manager?.registerSidebarTab !== "function") return false;
  manager.registerSidebarTab({
    id: "genscope",
    icon: "pi pi-chart-bar",
    title: "genscope",
    tooltip: "genscope: recent runs",
    type: "custom",
    render: (el) => {
      try { renderPanel(el); } catch (e) { warn("the sidebar tab", e); }
    },
  });
  return true;
}

function addFloatingPanel() {
  const button = document.createElement("button");
  button.className = "genscope-button";
  button.textContent = "genscope";
  button.title = "genscope: recent runs";
  button.addEventListener("click", () => {
    try {
      if (state.panel?.isConnected) {
        state.panel.remove();
        state.panel = null;
        return;
      }
      const panel = document.createElement("div");
      panel.className = "genscope-floating";
      document.body.appendChild(panel);
      renderPanel(panel);
    } catch (e) { warn("the floating panel", e); }
  });
  document.body.appendChild(button);
}

// Opens the panel (the tests use it where clicking the frontend's own button is not possible).
export function openPanel() {
  if (state.panel?.isConnected) { refreshPanel(); return true; }
  const tab = document.querySelector(".genscope-tab-button, button[aria-label^='genscope']");
  if (tab) { tab.click(); return true; }
  const button = document.querySelector(".genscope-button");
  if (button) { button.click(); return true; }
  return false;
}

// -- messages --------------------------------------------------------------------------------
function listen() {
  api.addEventListener("execution_start", (event) => {
    try {
      const id = event?.detail?.prompt_id;
      if (id) state.ourPrompts.add(id);
      while (state.ourPrompts.size > 200) state.ourPrompts.delete(state.ourPrompts.values().next().value);
      clearRun();
    } catch (e) { warn("execution_start", e); }
  });
  api.addEventListener("genscope.run", (event) => {
    try {
      const run = event?.detail;
      // Sent to this page's client only; the check guards against a reused client id.
      if (run && (state.ourPrompts.size === 0 || state.ourPrompts.has(run.prompt_id))) applyRun(run);
    } catch (e) { warn("genscope.run", e); }
  });
}

// -- registration ----------------------------------------------------------------------------
async function register() {
  [app, api] = await comfyModules();
  if (!app?.registerExtension || !api?.addEventListener) throw new Error("no app/api of ComfyUI");
  globalThis.genscopeComfyUI = { state, applyRun, clearRun, openPanel, nodeLines, placeFigures, formatSeconds, formatBytes };
  app.registerExtension({
    name: "genscope.graph",
    async beforeRegisterNodeDef(nodeType) {
      try { hookDrawing(nodeType); } catch (e) { warn("hooking a node type", e); }
    },
    async setup() {
      try {
        addStyle();
        listen();
        // node types registered before this extension (none in the usual order)
        for (const type of Object.values(globalThis.LiteGraph?.registered_node_types ?? {})) hookDrawing(type);
        hookCanvas();
        state.mode = addSidebarTab() ? "sidebar" : "floating";
        if (state.mode === "floating") addFloatingPanel();
      } catch (e) { warn("setup", e); }
    },
  });
}

register().catch((e) => warn("not loaded", e));
