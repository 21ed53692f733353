/**
 * `npm run bench:profile`: where the Worker's CPU goes per event. Runs events
 * through a local host with workerd's V8 inspector open, records a CPU
 * profile of the Worker over PROFILE_EVENTS events, and prints one JSON
 * document: CPU busy per event, self time per source module and the hottest
 * functions. A diagnostic, not a target: the sampling profiler slows
 * everything down, so compare its numbers with each other, not with `npm run bench`.
 */
import { createServer } from "node:http";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { ROOT } from "../local/build";
import { startHost } from "../local/host";
import { adminCall, bindRunner } from "../local/setup";
import { freePort, listen } from "./ports";

const EVENTS = Number(process.env.PROFILE_EVENTS ?? 300);
const WARMUP = 50;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}


/** A runner that answers every run at once with one message. */
async function startRunner() {
  const server = createServer(async (req, res) => {
    if (req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "bench", name: "fast", version: "1", runners: [{ name: "default", label: { en_US: "fast" } }] }));
      return;
    }
    let raw = "";
    for await (const c of req) raw += c;
    const runId = JSON.parse(raw).context.run_id as string;
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(`${JSON.stringify({ run_id: runId, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "ok" } } })}\n`);
    res.end(`${JSON.stringify({ run_id: runId, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
  });
  return { url: `http://127.0.0.1:${await listen(server)}`, close: () => server.close() };
}

/** The bundle's source module for each line, from esbuild's `// path` markers. */
function moduleOfLine(bundle: string): string[] {
  const modules: string[] = [];
  let current = "(bundle)";
  bundle.split("\n").forEach((line, i) => {
    const m = /^\/\/ ((?:node_modules|src|durable-objects)\/\S+)$/.exec(line);
    if (m) current = m[1].replace(/^node_modules\/((?:@[^/]+\/)?[^/]+)\/.*$/, "npm:$1");
    modules[i] = current;
  });
  return modules;
}

function summarize(profile: Profile, modules: string[], events: number) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const perModule = new Map<string, number>();
  const perFunction = new Map<string, number>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const { callFrame: f } = byId.get(id)!;
    const us = profile.timeDeltas[i];
    total += us;
    if (f.functionName === "(idle)") idle += us;
    const inBundle = f.url.endsWith("worker.js");
    const mod = inBundle ? (modules[f.lineNumber] ?? "(bundle)") : `native:${f.functionName || "(anonymous)"}`;
    const fn = `${f.functionName || "(anonymous)"} ${inBundle ? mod : "native"}`;
    perModule.set(mod, (perModule.get(mod) ?? 0) + us);
    perFunction.set(fn, (perFunction.get(fn) ?? 0) + us);
  });
  const top = (m: Map<string, number>, n: number) =>
    Object.fromEntries([...m].filter(([k]) => k !== "native:(idle)" && !k.startsWith("(idle)")).sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, us]) => [k, +(us / 1000 / events).toFixed(3)]));
  return {
    benchmark: "worker-cpu-profile",
    events,
    wall_ms_per_event: +(total / 1000 / events).toFixed(3),
    busy_ms_per_event: +((total - idle) / 1000 / events).toFixed(3),
    self_ms_per_event_by_module: top(perModule, 25),
    self_ms_per_event_by_function: top(perFunction, 25),
  };
}

const dir = mkdtempSync(join(tmpdir(), "agent-host-profile-"));
const runner = await startRunner();
const inspectorPort = await freePort();
const host = await startHost({ adminToken: "profile-admin-token-0123456789", dbUrl: `file:${join(dir, "host.db")}`, inspectorPort });
try {
  await bindRunner(host, { baseUrl: runner.url, runnerId: "http:bench/fast/default", agentId: "bench" });
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { title: string; webSocketDebuggerUrl: string }[];
  // Miniflare names the (unnamed) user Worker "core:user:"; its own helpers have other names.
  const target = targets.find((t) => t.title.includes("core:user:"));
  if (!target) throw new Error(`no Worker among the inspector targets: ${targets.map((t) => t.title).join(", ")}`);
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r, e) => ws.once("open", r).once("error", e));
  let nextId = 0;
  const pending = new Map<number, (result: unknown) => void>();
  ws.on("message", (m) => {
    const msg = JSON.parse(String(m)) as { id?: number; result?: unknown };
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
  });
  const send = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve) => {
      const id = ++nextId;
      pending.set(id, resolve as (r: unknown) => void);
      ws.send(JSON.stringify({ id, method, params }));
    });
  const event = async (i: number) => {
    const res = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", { event_type: "message.received", conversation_id: `c${i % 20}`, actor: { actor_type: "user", actor_id: "u" }, input: { text: `e${i}` } });
    const stream = await fetch(`${host.url}/v1/runs/${res.body.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    if (!(await stream.text()).includes('"status":"completed"')) throw new Error(`run ${res.body.run_id} did not complete`);
  };
  for (let i = 0; i < WARMUP; i++) await event(i);
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 100 });
  await send("Profiler.start");
  for (let i = 0; i < EVENTS; i++) await event(WARMUP + i);
  const { profile } = await send<{ profile: Profile }>("Profiler.stop");
  ws.close();
  console.log(JSON.stringify(summarize(profile, moduleOfLine(readFileSync(join(ROOT, "dist/worker.js"), "utf8")), EVENTS), null, 2));
} finally {
  await host.dispose();
  runner.close();
  rmSync(dir, { recursive: true, force: true });
}
