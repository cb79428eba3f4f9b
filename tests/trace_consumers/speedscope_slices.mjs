// Loads a Chrome trace with speedscope's own importer (npm speedscope, the bundled app in
// dist/release) and prints, as JSON, the call tree of each profile (one per pid/tid): name,
// args, ts, dur in µs, depth, parent index, and every warning the importer prints
// ("Tried to end ... when ... was on the top of the stack").
//   node speedscope_slices.mjs NODE_MODULES TRACE.json
// The npm package ships only the browser bundle, so this script loads the bundle in node's
// vm with a do-nothing DOM, stops it before it renders the app (the last statement, which
// prints "speedscope v..." and mounts the UI) and calls the importer the app calls for a
// Trace Event Format file (found by its log line "Importing as Trace Event Format
// profile") after initialising its module (found by the key list the importer checks).
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';

const [modules, tracePath] = process.argv.slice(2);
const dir = path.join(modules, 'speedscope/dist/release');
const bundle = fs.readdirSync(dir).find(f => /^speedscope-.*\.js$/.test(f));
let src = fs.readFileSync(path.join(dir, bundle), 'utf8');
const importer = /Importing as Trace Event Format profile"\),(\w+)\(/.exec(src);
const init = /(\w+)=\w+\(\(\)=>\{"use strict";[\w();]*\w+=\["line","column","name","category"/.exec(src);
const render = src.lastIndexOf('console.log(`speedscope v');
if (!importer || !init || render < 0) {
  console.error(`speedscope bundle ${bundle}: importer, module init or app start not found`);
  process.exit(2);
}
src = src.slice(0, render) + `globalThis.__speedscope={init:${init[1]},importTrace:${importer[1]}};})();`;
const inert = new Proxy(function() {}, {
  get: (t, k) => (k === Symbol.toPrimitive ? () => '' : inert),
  apply: () => inert,
  construct: () => inert,
});
Object.assign(globalThis, {
  window: globalThis, document: inert, localStorage: inert, addEventListener() {},
  matchMedia: () => ({matches: false, addEventListener() {}, addListener() {}}),
  location: {hash: '', search: '', href: ''},
});
const warnings = [];
for (const level of ['warn', 'error']) {
  console[level] = (...args) => warnings.push(`${level}: ${args.join(' ')}`);
}
vm.runInThisContext(src);
globalThis.__speedscope.init();
const trace = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
// speedscope names a frame "<name> <JSON of args>": map each key back to its event.
const byKey = new Map();
for (const e of trace.traceEvents) {
  if (e.ph !== 'X' && e.ph !== 'B') continue;
  const key = e.args ? `${e.name} ${JSON.stringify(e.args)}` : e.name;
  byKey.set(`${e.pid}/${e.tid}/${key}`, e);
}
const group = globalThis.__speedscope.importTrace(trace);
const slices = [];
for (const profile of group.profiles) {
  const m = /\(pid (\d+)\).*\(tid (\d+)\)|\(pid (\d+), tid (\d+)\)/.exec(profile.getName());
  const pid = Number(m[1] ?? m[3]), tid = Number(m[2] ?? m[4]);
  const stack = [];
  profile.forEachCall(
      (node, value) => {
        const e = byKey.get(`${pid}/${tid}/${node.frame.key}`);
        if (!e) warnings.push(`frame ${node.frame.key} matches no event of pid ${pid} tid ${tid}`);
        stack.push(slices.length);
        slices.push({pid, tid, name: e ? e.name : node.frame.name, args: e?.args ?? {},
                     ts: value, dur: null, depth: stack.length - 1,
                     parent: stack.length > 1 ? stack[stack.length - 2] : -1});
      },
      (node, value) => {
        const s = slices[stack.pop()];
        s.dur = value - s.ts;
      });
}
process.stdout.write(JSON.stringify({consumer: 'speedscope', warnings, slices}) + '\n');
