/**
 * Per-event host overhead (part of `npm run bench`).
 *
 * overhead = (ingress request sent → runner receives the run request)
 *          + (runner sends its last result → the run's `end` arrives on its stream)
 * over EVENTS events spread across CONVERSATIONS conversations. The bench opens
 * each run's stream between the two windows (the runner answers once it is
 * open), so neither window includes the observer's own request. The floor is
 * measured in the same run: a bare Worker → Durable Object → runner fetch
 * round trip with one libSQL write (bench/floor-worker.ts), on the same
 * Miniflare/workerd and the same libSQL transport.
 */
import { build } from "esbuild";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Miniflare } from "miniflare";
import { ROOT } from "../local/build";
import { listenForWorker } from "../local/db-listener";
import { openEmbeddedDb } from "../local/libsql";
import { startHost, type LocalHost } from "../local/host";
import { workerOutputToStderr } from "./worker-output";
import { adminCall, bindRunner } from "../local/setup";
import { cpuMsOf, spawnedBy } from "./process-cpu";
import { quantile, stats } from "./stats";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 500);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 100);
const WARMUP = 30;
/** Host events, then as many floor round trips, per block. */
const BLOCK = 50;
const TARGET_RATIO_P50 = 2;


/**
 * A runner that records when it received a run request, answers as soon as
 * the bench lets it (`arrived(runId)` gives the time and the release), and
 * records when it sent its last result.
 */
async function startBenchRunner() {
  type Arrival = { at: number; release: () => void };
  // Whichever comes first, the run request or the bench asking for it, makes the meeting point.
  const arrivals = new Map<string, { promise: Promise<Arrival>; resolve: (a: Arrival) => void }>();
  const meeting = (runId: string) => {
    let m = arrivals.get(runId);
    if (!m) {
      let resolve!: (a: Arrival) => void;
      m = { promise: new Promise<Arrival>((r) => (resolve = r)), resolve };
      arrivals.set(runId, m);
    }
    return m;
  };
  const arrived = (runId: string) => meeting(runId).promise.finally(() => arrivals.delete(runId));
  const lastSent = new Map<string, number>();
  const server = createServer(async (req, res) => {
    if (req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "bench", name: "fast", version: "1", runners: [{ name: "default", label: { en_US: "fast" } }] }));
      return;
    }
    const t = performance.now();
    let raw = "";
    for await (const c of req) raw += c;
    if (req.url === "/floor") {
      res.setHeader("content-type", "application/x-ndjson");
      res.end('{"type":"run.completed"}\n');
      return;
    }
    const runId = JSON.parse(raw).context.run_id as string;
    await new Promise<void>((release) => meeting(runId).resolve({ at: t, release }));
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(`${JSON.stringify({ run_id: runId, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "ok" } } })}\n`);
    lastSent.set(runId, performance.now());
    res.end(`${JSON.stringify({ run_id: runId, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived, lastSent, close: () => server.close() };
}

async function startFloor(dir: string) {
  // Inside the project: workerd refuses module paths that climb out of the working directory.
  const outfile = join(ROOT, "dist/bench/floor.js");
  await build({ entryPoints: [join(ROOT, "bench/floor-worker.ts")], outfile, bundle: true, format: "esm", platform: "neutral", external: ["cloudflare:*"], logLevel: "warning" });
  const embedded = await openEmbeddedDb(`file:${join(dir, "floor.db")}`);
  await embedded.executor.query({ sql: "CREATE TABLE IF NOT EXISTS floor (id TEXT PRIMARY KEY, body TEXT)", params: [], method: "run" });
  const listener = await listenForWorker(embedded.executor, "floor-token");
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    scriptPath: outfile,
    compatibilityDate: "2026-04-01",
    durableObjects: { FLOOR: "FloorDO" },
    serviceBindings: { LIBSQL: { external: { address: listener.address, http: {} } } },
    bindings: { LIBSQL_BINDING_TOKEN: "floor-token" },
  });
  return { url: (await mf.ready).origin, dispose: async () => (await mf.dispose(), await listener.close(), embedded.close()) };
}

type BenchRunner = Awaited<ReturnType<typeof startBenchRunner>>;

/** One event through the host: its inbound and outbound overhead (ms). */
async function hostEvent(host: LocalHost, runner: BenchRunner, conversation: string, text: string) {
  const t0 = performance.now();
  const res = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", {
    event_type: "message.received",
    conversation_id: conversation,
    actor: { actor_type: "user", actor_id: "u" },
    input: { text },
  });
  const runId = res.body.run_id;
  const arrival = await runner.arrived(runId);
  const stream = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  const reader = stream.body!.getReader();
  arrival.release();
  let frames = "";
  const decoder = new TextDecoder();
  while (!frames.includes("event: end")) {
    const { done, value } = await reader.read();
    if (done) break;
    frames += decoder.decode(value, { stream: true });
  }
  const t3 = performance.now();
  await reader.cancel();
  if (!frames.includes('"status":"completed"')) throw new Error(`run ${runId} did not complete: ${frames.slice(-200)}`);
  return { inbound: arrival.at - t0, outbound: t3 - runner.lastSent.get(runId)! };
}

/** One bare Worker → DO → runner round trip with one libSQL write (ms). */
async function floorRoundTrip(floorUrl: string, runnerUrl: string, conversation: string) {
  const t0 = performance.now();
  const res = await fetch(`${floorUrl}/?c=${conversation}&runner=${encodeURIComponent(`${runnerUrl}/floor`)}`);
  await res.text();
  return performance.now() - t0;
}

export async function benchHostOverhead() {
  const dir = mkdtempSync(join(tmpdir(), "agent-host-bench-"));
  const runner = await startBenchRunner();
  const { value: host, pids: hostWorkerd } = await spawnedBy(() => startHost({ adminToken: "bench-admin-token-0123456789", dbUrl: `file:${join(dir, "host.db")}`, onRuntimeOutput: workerOutputToStderr() }));
  const { value: floor, pids: floorWorkerd } = await spawnedBy(() => startFloor(dir));
  await bindRunner(host, { baseUrl: runner.url, runnerId: "http:bench/fast/default", agentId: "bench" });

  const inbound: number[] = [];
  const outbound: number[] = [];
  const total: number[] = [];
  const floorMs: number[] = [];
  // workerd CPU spent in each side's blocks (ms), warm-up included: the latency ratio follows it.
  const cpu = { host: 0, floor: 0, measured: true };
  const spent = (pids: number[], during: () => Promise<void>) => async () => {
    const before = cpuMsOf(pids);
    await during();
    const after = cpuMsOf(pids);
    if (before === null || after === null) cpu.measured = false;
    return (after ?? 0) - (before ?? 0);
  };
  // Host events and floor round trips alternate in blocks: both see the same machine over the run,
  // and neither measures the other's tail work.
  for (let block = 0; block * BLOCK < EVENTS + WARMUP; block++) {
    const indexes = Array.from({ length: BLOCK }, (_, j) => block * BLOCK + j).filter((i) => i < EVENTS + WARMUP);
    cpu.host += await spent(hostWorkerd, async () => {
      for (const i of indexes) {
        const event = await hostEvent(host, runner, `bench-${i % CONVERSATIONS}`, `event ${i}`);
        if (i < WARMUP) continue;
        inbound.push(event.inbound);
        outbound.push(event.outbound);
        total.push(event.inbound + event.outbound);
      }
    })();
    cpu.floor += await spent(floorWorkerd, async () => {
      for (const i of indexes) {
        const ms = await floorRoundTrip(floor.url, runner.url, `bench-${i % CONVERSATIONS}`);
        if (i >= WARMUP) floorMs.push(ms);
      }
    })();
  }
  const perEvent = (ms: number) => +(ms / (EVENTS + WARMUP)).toFixed(3);

  const ratio = quantile(total, 0.5) / quantile(floorMs, 0.5);
  const report = {
    benchmark: "host-overhead",
    events: EVENTS,
    conversations: CONVERSATIONS,
    concurrency: 1,
    host_ms: { ingress_to_runner_request: stats(inbound), last_result_to_run_finished: stats(outbound), overhead: stats(total) },
    floor_ms: stats(floorMs),
    ratio_p50: +ratio.toFixed(3),
    ratio_p99: +(quantile(total, 0.99) / quantile(floorMs, 0.99)).toFixed(3),
    target_ratio_p50: TARGET_RATIO_P50,
    meets_target: ratio <= TARGET_RATIO_P50,
    // Diagnostic (Linux only, else null): workerd CPU per host event and per floor round trip. The host event's
    // includes the bench opening its stream.
    workerd_cpu_ms_per_event: cpu.measured && cpu.floor > 0 ? { host: perEvent(cpu.host), floor: perEvent(cpu.floor), ratio: +(cpu.host / cpu.floor).toFixed(3) } : null,
  };
  await host.dispose();
  await floor.dispose();
  runner.close();
  rmSync(dir, { recursive: true, force: true });
  return report;
}
