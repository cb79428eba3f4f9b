// Loads a Chrome trace into the Chrome DevTools trace engine (npm @paulirish/trace_engine,
// the engine of the DevTools Performance panel) and prints, as JSON, the slices it builds on
// each thread (name, args, ts, dur in µs, depth, parent index) and every warning it gives.
//   node trace_engine_slices.mjs NODE_MODULES TRACE.json
// A slice of the trace that is missing from its thread's tree is one the engine dropped.
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [modules, tracePath] = process.argv.slice(2);
const warnings = [];
for (const level of ['warn', 'error']) {
  console[level] = (...args) => warnings.push(`${level}: ${args.join(' ')}`);
}
const {analyzeEvents} =
    await import(pathToFileURL(path.join(modules, '@paulirish/trace_engine/analyze-trace.mjs')));
const trace = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
const {parsedTrace} = await analyzeEvents(trace.traceEvents);
for (const w of parsedTrace.data.Warnings?.allWarnings?.values?.() ?? []) {
  for (const e of w) warnings.push(`engine: ${e.name}`);
}
const slices = [];
for (const [pid, proc] of parsedTrace.data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    const walk = (node, parent) => {
      const e = node.entry;
      const index = slices.length;
      slices.push({pid, tid, name: e.name, args: e.args ?? {}, ts: e.ts, dur: e.dur ?? 0,
                   depth: node.depth, parent});
      for (const child of node.children) walk(child, index);
    };
    for (const root of thread.tree?.roots ?? []) walk(root, -1);
  }
}
process.stdout.write(JSON.stringify({consumer: 'trace_engine', warnings, slices}) + '\n');
