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

/** A bare Worker from bench/ under its own Miniflare, with a libSQL file of its own over the host's transport. */
async function startBareWorker(dir: string, name: "floor" | "chain", durableObjects: Record<string, string>, schema: string) {
  // Inside the project: workerd refuses module paths that climb out of the working directory.
  const outfile = join(ROOT, `dist/bench/${name}.js`);
  await build({ entryPoints: [join(ROOT, `bench/${name}-worker.ts`)], outfile, bundle: true, format: "esm", platform: "neutral", external: ["cloudflare:*"], logLevel: "warning" });
  const embedded = await openEmbeddedDb(`file:${join(dir, `${name}.db`)}`);
  await embedded.executor.query({ sql: schema, params: [], method: "run" });
  const listener = await listenForWorker(embedded.executor, `${name}-token`);
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    scriptPath: outfile,
    compatibilityDate: "2026-04-01",
    durableObjects,
    serviceBindings: { LIBSQL: { external: { address: listener.address, http: {} } } },
    bindings: { LIBSQL_BINDING_TOKEN: `${name}-token` },
  });
  return { url: (await mf.ready).origin, dispose: async () => (await mf.dispose(), await listener.close(), embedded.close()) };
}

type BenchRunner = Awaited<ReturnType<typeof startBenchRunner>>;

/**
 * One event, sent by `send` (which answers its run id), then followed on the run's stream
 * (`streamOf`): its inbound and outbound overhead (ms).
 */
async function eventThrough(runner: BenchRunner, send: () => Promise<string>, streamOf: (runId: string) => Promise<Response>) {
  const t0 = performance.now();
  const runId = await send();
  const arrival = await runner.arrived(runId);
  const stream = await streamOf(runId);
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

const hostEvent = (host: LocalHost, runner: BenchRunner, conversation: string, text: string) =>
  eventThrough(
    runner,
    async () =>
      (
        await adminCall<{ run_id: string }>(host, "POST", "/v1/events", {
          event_type: "message.received",
          conversation_id: conversation,
          actor: { actor_type: "user", actor_id: "u" },
          input: { text },
        })
      ).body.run_id,
    (runId) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }),
  );

/** The same event through the minimum chain (bench/chain-worker.ts). */
const chainEvent = (chainUrl: string, runner: BenchRunner, conversation: string, text: string) =>
  eventThrough(
    runner,
    async () => {
      const res = await fetch(`${chainUrl}/events?c=${conversation}&runner=${encodeURIComponent(runner.url)}`, { method: "POST", body: JSON.stringify({ conversation_id: conversation, input: { text } }) });
      return ((await res.json()) as { run_id: string }).run_id;
    },
    (runId) => fetch(`${chainUrl}/stream?c=${conversation}&run=${runId}`),
  );

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
  const { value: floor, pids: floorWorkerd } = await spawnedBy(() => startBareWorker(dir, "floor", { FLOOR: "FloorDO" }, "CREATE TABLE floor (id TEXT PRIMARY KEY, body TEXT)"));
  const { value: chain, pids: chainWorkerd } = await spawnedBy(() => startBareWorker(dir, "chain", { CHAIN: "ChainDO" }, "CREATE TABLE chain_run (id TEXT PRIMARY KEY, status TEXT, event TEXT, results TEXT)"));
  await bindRunner(host, { baseUrl: runner.url, runnerId: "http:bench/fast/default", agentId: "bench" });

  const measured = () => ({ inbound: [] as number[], outbound: [] as number[], total: [] as number[] });
  const hostMs = measured();
  const chainMs = measured();
  const floorMs: number[] = [];
  // workerd CPU spent in each side's blocks (ms), warm-up included: the latency ratio follows it.
  const cpu = { host: 0, floor: 0, chain: 0, measured: true };
  const spent = async (pids: number[], during: () => Promise<void>) => {
    const before = cpuMsOf(pids);
    await during();
    const after = cpuMsOf(pids);
    if (before === null || after === null) cpu.measured = false;
    return (after ?? 0) - (before ?? 0);
  };
  const eventsInto = (into: ReturnType<typeof measured>, indexes: number[], one: (conversation: string, text: string) => ReturnType<typeof eventThrough>) => async () => {
    for (const i of indexes) {
      const event = await one(`bench-${i % CONVERSATIONS}`, `event ${i}`);
      if (i < WARMUP) continue;
      into.inbound.push(event.inbound);
      into.outbound.push(event.outbound);
      into.total.push(event.inbound + event.outbound);
    }
  };
  // Host events, floor round trips and chain events alternate in blocks: all see the same machine over
  // the run, and none measures another's tail work.
  for (let block = 0; block * BLOCK < EVENTS + WARMUP; block++) {
    const indexes = Array.from({ length: BLOCK }, (_, j) => block * BLOCK + j).filter((i) => i < EVENTS + WARMUP);
    cpu.host += await spent(hostWorkerd, eventsInto(hostMs, indexes, (c, text) => hostEvent(host, runner, c, text)));
    cpu.floor += await spent(floorWorkerd, async () => {
      for (const i of indexes) {
        const ms = await floorRoundTrip(floor.url, runner.url, `bench-${i % CONVERSATIONS}`);
        if (i >= WARMUP) floorMs.push(ms);
      }
    });
    cpu.chain += await spent(chainWorkerd, eventsInto(chainMs, indexes, (c, text) => chainEvent(chain.url, runner, c, text)));
  }
  const perEvent = (ms: number) => +(ms / (EVENTS + WARMUP)).toFixed(3);
  const overFloor = (ms: number[], q: number) => +(quantile(ms, q) / quantile(floorMs, q)).toFixed(3);
  const windows = (m: ReturnType<typeof measured>) => ({ ingress_to_runner_request: stats(m.inbound), last_result_to_run_finished: stats(m.outbound), overhead: stats(m.total) });

  const ratio = overFloor(hostMs.total, 0.5);
  const report = {
    benchmark: "host-overhead",
    events: EVENTS,
    conversations: CONVERSATIONS,
    concurrency: 1,
    host_ms: windows(hostMs),
    floor_ms: stats(floorMs),
    ratio_p50: ratio,
    ratio_p99: overFloor(hostMs.total, 0.99),
    target_ratio_p50: TARGET_RATIO_P50,
    meets_target: ratio <= TARGET_RATIO_P50,
    // Diagnostic: the same two windows through the bare minimum chain the design mandates (bench/chain-worker.ts),
    // so the ratio can be read as (what the design's hops cost) × (what the host's logic adds to them).
    minimum_chain: { ms: windows(chainMs), ratio_p50: overFloor(chainMs.total, 0.5), host_over_chain_p50: +(quantile(hostMs.total, 0.5) / quantile(chainMs.total, 0.5)).toFixed(3) },
    // Diagnostic (Linux only, else null): workerd CPU per event (host, chain) and per floor round trip. Events
    // include the bench opening their stream.
    workerd_cpu_ms_per_event:
      cpu.measured && cpu.floor > 0 ? { host: perEvent(cpu.host), chain: perEvent(cpu.chain), floor: perEvent(cpu.floor), host_over_floor: +(cpu.host / cpu.floor).toFixed(3) } : null,
  };
  await host.dispose();
  await floor.dispose();
  await chain.dispose();
  runner.close();
  rmSync(dir, { recursive: true, force: true });
  return report;
}
