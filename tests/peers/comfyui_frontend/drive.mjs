// Drives ComfyUI's own page in real headless Chromium (Debian's /usr/bin/chromium through
// Playwright, npm playwright-core pinned in package-lock.json) for tests/peers/comfyui_frontend.sh:
// loads a small SD1.5 workflow (the test's checkpoint, 64x64, 2 steps, fixed seed) with the page's
// own loader,
// queues it from the page, waits for genscope's figures on the nodes, queues it again (every node
// cached), takes screenshots of the graph and of the runs panel, opens a run's HTML report from
// the panel, and writes what the page showed to OUT/result.json (comfyui_frontend_check.py
// compares it with the run documents).
//
//   node drive.mjs NODE_MODULES URL CHECKPOINT OUT
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const [modules, url, checkpoint, out] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { chromium } = require("playwright-core");

const log = (...a) => console.log("[drive]", ...a);
const result = { console: [], page_errors: [], steps: [] };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "genscope-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 1000 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const finish = async (code) => {
  fs.writeFileSync(path.join(out, "result.json"), JSON.stringify(result, null, 1));
  await context.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(code);
};

try {
  const page = context.pages()[0] ?? await context.newPage();
  page.on("console", (m) => {
    if (["error", "warning"].includes(m.type())) result.console.push(`${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => result.page_errors.push(`${e.message}\n${e.stack ?? ""}`));
  result.failed_requests = [];
  page.on("response", (r) => { if (r.status() >= 400) result.failed_requests.push(`${r.status()} ${r.url()}`); });
  await page.goto(url);
  await page.waitForFunction(() => globalThis.comfyAPI?.app?.app?.graph && globalThis.genscopeComfyUI?.state?.mode,
    null, { timeout: 180_000 });
  result.frontend_version = await page.evaluate(() => globalThis.__COMFYUI_FRONTEND_VERSION__ ?? null);
  result.panel_mode = await page.evaluate(() => genscopeComfyUI.state.mode);
  log(`frontend ${result.frontend_version}, panel: ${result.panel_mode}`);
  await page.keyboard.press("Escape");  // a first-start dialog, if any

  // The workflow: SD1.5 text to image, small (64x64, 2 steps, a fixed seed), loaded through the
  // page's own loader of API-format prompts (every frontend's default workflow differs).
  result.graph = await page.evaluate(async (ckpt) => {
    const app = comfyAPI.app.app;
    const prompt = {
      "4": { class_type: "CheckpointLoaderSimple", inputs: { ckpt_name: ckpt } },
      "6": { class_type: "CLIPTextEncode", inputs: { text: "a red cube on a wooden table", clip: ["4", 1] } },
      "7": { class_type: "CLIPTextEncode", inputs: { text: "blurry", clip: ["4", 1] } },
      "5": { class_type: "EmptyLatentImage", inputs: { width: 64, height: 64, batch_size: 1 } },
      "3": { class_type: "KSampler", inputs: { seed: 1234, steps: 2, cfg: 7, sampler_name: "euler",
             scheduler: "normal", denoise: 1, model: ["4", 0], positive: ["6", 0], negative: ["7", 0],
             latent_image: ["5", 0] } },
      "8": { class_type: "VAEDecode", inputs: { samples: ["3", 0], vae: ["4", 2] } },
      "9": { class_type: "SaveImage", inputs: { filename_prefix: "genscope", images: ["8", 0] } },
    };
    await app.loadApiJson(prompt, "genscope-test.json");
    const graph = app.graph;
    const nodes = graph._nodes ?? graph.nodes;
    // Laid out in columns, 90 units between nodes for the figures under each.
    const byId = (id) => nodes.find((n) => String(n.id) === id);
    let x = 40;
    for (const column of [["4"], ["6", "7", "5"], ["3"], ["8", "9"]]) {
      let y = 40, width = 0;
      for (const id of column) {
        const n = byId(id);
        n.pos = [x, column.length === 1 && id === "4" ? 200 : y];
        y += n.size[1] + 120;
        width = Math.max(width, n.size[0]);
      }
      x += width + 60;
    }
    for (const n of nodes.filter((n) => n.type === "KSampler")) {
      const control = n.widgets?.find((w) => w.name === "control_after_generate");
      if (control) control.value = "fixed";  // the second prompt must be the same (all cached)
    }
    graph.setDirtyCanvas(true, true);
    return nodes.map((n) => ({ id: String(n.id), type: n.type, title: n.title }));
  }, checkpoint);
  log(`workflow: ${result.graph.length} nodes`);

  const queue = async (label) => {
    const before = await page.evaluate(() => [...genscopeComfyUI.state.ourPrompts]);
    await page.evaluate(() => comfyAPI.app.app.queuePrompt(0, 1));
    const t0 = Date.now();
    await page.waitForFunction((known) => {
      const s = genscopeComfyUI.state;
      const id = s.run?.prompt_id;
      return id && !known.includes(id) && s.ourPrompts.has(id) && Object.keys(s.drawn).length > 0;
    }, before, { timeout: 900_000, polling: 250 });
    await page.waitForTimeout(300);  // a few more frames: every visible node drawn
    const shown = await page.evaluate(() => {
      const s = genscopeComfyUI.state;
      return { run: s.run, shown: Object.fromEntries(Object.entries(s.shown).map(([k, v]) => [k, { lines: v.lines, marks: v.marks }])),
               drawn: s.drawn, errors: s.errors };
    });
    log(`${label}: prompt ${shown.run.prompt_id} shown after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    result.steps.push({ label, ...shown });
    return shown;
  };

  const fit = () => page.evaluate(() => {  // the whole graph and the figures under it in view
    const app = comfyAPI.app.app;
    const nodes = app.graph._nodes ?? app.graph.nodes;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const n of nodes) {
      x0 = Math.min(x0, n.pos[0]); y0 = Math.min(y0, n.pos[1] - 40);
      x1 = Math.max(x1, n.pos[0] + n.size[0]); y1 = Math.max(y1, n.pos[1] + n.size[1] + 70);
    }
    const canvas = app.canvas.canvas;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    // below the menus that newer frontends float over the top of the canvas
    const top = 110, bottom = 30;
    const scale = Math.min((w - 120) / (x1 - x0), (h - top - bottom) / (y1 - y0), 1.2);
    app.canvas.ds.scale = scale;
    app.canvas.ds.offset = [(w - (x1 - x0) * scale) / 2 / scale - x0, top / scale - y0];
    app.canvas.setDirty(true, true);
  });

  await queue("first");
  await fit();
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(out, "graph.png") });
  await queue("cached");

  // The panel: the frontend's own button for it (a sidebar tab, or the floating button).
  // (the sidebar's buttons: class <id>-tab-button up to 1.2x, aria-label = the tab's tooltip later)
  const button = result.panel_mode === "sidebar"
    ? ".genscope-tab-button, button[aria-label^='genscope']" : ".genscope-button";
  await page.click(button, { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelectorAll(".genscope-run").length >= 2, null, { timeout: 30_000 });
  result.panel_rows = await page.evaluate(() => [...document.querySelectorAll(".genscope-run")].map((r) => ({
    prompt_id: r.dataset.promptId, text: r.innerText })));
  // The earlier run back on the graph (the figures under the panel), then the screenshot.
  const first = result.steps[0].run.prompt_id;
  await page.click(`.genscope-run[data-prompt-id="${first}"] .genscope-show`);
  await page.waitForFunction((id) => genscopeComfyUI.state.run?.prompt_id === id, first, { timeout: 30_000 });
  await page.waitForTimeout(500);
  result.shown_again = await page.evaluate(() => genscopeComfyUI.state.run.prompt_id);
  await page.screenshot({ path: path.join(out, "panel.png") });

  // A run's report, opened from the panel in a new tab.
  const [report] = await Promise.all([
    context.waitForEvent("page", { timeout: 60_000 }),
    page.click(`.genscope-run[data-prompt-id="${first}"] .genscope-report`),
  ]);
  await report.waitForLoadState("load", { timeout: 120_000 });
  result.report = { url: report.url(), title: await report.title(),
                    text: (await report.evaluate(() => document.body.innerText)).slice(0, 4000) };
  log(`report: ${result.report.title}`);

  // Faults: malformed messages and a node whose figures cannot be drawn must stay inside the
  // extension (a console warning), and the canvas must go on drawing the other nodes.
  await report.close();
  result.console_before_faults = result.console.length;
  result.page_errors_before_faults = result.page_errors.length;
  result.fault = await page.evaluate(async () => {
    const { api } = comfyAPI.api;
    const s = genscopeComfyUI.state;
    const before = s.run.prompt_id;
    for (const detail of [null, "text", { nodes: "not a list" }, { prompt_id: 5, nodes: [null, 7] }]) {
      api.dispatchEvent(new CustomEvent("genscope.run", { detail }));
    }
    genscopeComfyUI.applyRun({ prompt_id: before, nodes: [null, 7] });  // malformed: a warning, nothing shown changes
    const ids = Object.keys(s.shown);
    s.shown[ids[0]] = { lines: null, marks: [] };  // drawing it throws
    s.drawn = {};
    comfyAPI.app.app.canvas.setDirty(true, true);
    await new Promise((r) => setTimeout(r, 1000));
    return { run_kept: s.run?.prompt_id === before, broken: ids[0], errors: s.errors,
             drawn_after: Object.keys(s.drawn), shown: ids };
  });
  // Placement (no subgraph in this workflow, so with a run made up here): nodes "12:5" and
  // "12:6" of a subgraph node 12, a node of a group expansion shown on its display node 3, and
  // a node the graph does not have.
  result.placement = await page.evaluate(() => {
    const run = { slowest: "12:5", highest_ram: "3", highest_vram: null, nodes: [
      { node_id: "3", status: "ok", cached: false, duration_ns: 1.5e9, peak_ram_bytes: 2 ** 31 },
      { node_id: "12:5", status: "ok", cached: false, duration_ns: 2e9, peak_ram_bytes: 2 ** 30 },
      { node_id: "12:6", status: "ok", cached: false, duration_ns: 0.5e9, peak_ram_bytes: 3 * 2 ** 30 },
      { node_id: "40", display_node: "3", status: "ok", cached: true, duration_ns: 1 },
      { node_id: "77", status: "ok", cached: true, duration_ns: 1 } ] };
    const shown = genscopeComfyUI.placeFigures(run, (id) => ["3", "12"].includes(id));
    return Object.fromEntries(Object.entries(shown).map(([k, v]) => [k, { lines: v.lines, marks: v.marks }]));
  });
  await finish(0);
} catch (e) {
  result.failure = `${e.message}`;
  console.error("[drive] FAILED:", e);
  try {
    const page = context.pages()[0];
    if (page) await page.screenshot({ path: path.join(out, "failure.png") });
  } catch (_) { /* nothing more to show */ }
  await finish(1);
}
