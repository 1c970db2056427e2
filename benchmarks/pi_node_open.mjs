// Times Pi's own Node session code on one file: SessionManager.open + buildSessionContext.
// Usage: node pi_node_open.mjs <pi-coding-agent package dir> <session.jsonl> <repeat>
// Prints one JSON line: {"best_ms": ..., "times_ms": [...], "messages": ...}.
// Run by bench_engine.py only when PI_NODE_INSTALL points at an install (never in CI).
import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const [packageDir, sessionPath, repeatText] = process.argv.slice(2);
const moduleUrl = pathToFileURL(join(packageDir, "dist/core/session-manager.js")).href;
const { SessionManager } = await import(moduleUrl);
const repeat = Number(repeatText || "3");
const times = [];
let messages = 0;
for (let i = 0; i < repeat; i++) {
  if (globalThis.gc) globalThis.gc();
  const start = performance.now();
  const manager = SessionManager.open(sessionPath);
  const context = manager.buildSessionContext();
  times.push(performance.now() - start);
  messages = context.messages.length;
}
console.log(JSON.stringify({ best_ms: Math.min(...times), times_ms: times, messages }));
