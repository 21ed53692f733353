/**
 * Steering claim latency (part of `npm run bench`): a message for a
 * conversation whose steering runner is busy, from the ingress request to
 * (a) the host's `steered` answer and (b) the item being returned by
 * `steering.pull` to the run that claimed it.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startHost } from "../local/host";
import { workerOutputToStderr } from "./worker-output";
import { adminCall, bindRunner } from "../local/setup";
import { stats } from "./stats";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 500);
const CONVERSATIONS = 20;
const WARMUP = 20;

interface HeldRun {
  runId: string;
  token: string;
  apiBase: string;
}

/** A steering runner that holds every run open until released, and lets the bench pull as it would. */
async function startHoldingRunner() {
  const held = new Map<string, HeldRun>();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const server = createServer(async (req, res) => {
    if (req.url === "/manifest") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ protocol: "agent-runner/v1", author: "bench", name: "steer", version: "1", runners: [{ name: "default", label: { en_US: "steer" }, capabilities: { steering: true } }] }));
      return;
    }
    let raw = "";
    for await (const c of req) raw += c;
    const ctx = JSON.parse(raw).context;
    held.set(ctx.conversation.conversation_id, { runId: ctx.run_id, token: ctx.runtime.api.token, apiBase: ctx.runtime.api.base_url });
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    await released;
    res.write(`${JSON.stringify({ run_id: ctx.run_id, type: "message.completed", sequence: 1, data: { message: { role: "assistant", content: "ok" } } })}\n`);
    res.end(`${JSON.stringify({ run_id: ctx.run_id, type: "run.completed", sequence: 2, data: { finish_reason: "stop" } })}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, held, release, close: () => (server.closeAllConnections(), server.close()) };
}

async function pull(run: HeldRun): Promise<{ event: { event_id: string } }[]> {
  const res = await fetch(`${run.apiBase}/v1/runs/${run.runId}/api`, {
    method: "POST",
    headers: { authorization: `Bearer ${run.token}`, "content-type": "application/json" },
    body: JSON.stringify({ action: "steering.pull", params: {} }),
  });
  const body = (await res.json()) as { ok: boolean; data: { items: { event: { event_id: string } }[] } };
  if (!body.ok) throw new Error(`steering.pull failed: ${JSON.stringify(body)}`);
  return body.data.items;
}

export async function benchSteeringClaim() {
  const dir = mkdtempSync(join(tmpdir(), "agent-host-bench-steer-"));
  const runner = await startHoldingRunner();
  const host = await startHost({ adminToken: "bench-admin-token-0123456789", dbUrl: `file:${join(dir, "host.db")}`, onRuntimeOutput: workerOutputToStderr() });
  await bindRunner(host, { baseUrl: runner.url, runnerId: "http:bench/steer/default", agentId: "steer" });
  const message = (conversation: string, text: string, eventId?: string) => ({
    event_id: eventId,
    event_type: "message.received",
    conversation_id: conversation,
    actor: { actor_type: "user", actor_id: "u" },
    input: { text },
  });

  for (let c = 0; c < CONVERSATIONS; c++) await adminCall(host, "POST", "/v1/events", message(`steer-${c}`, "hold"));
  const deadline = Date.now() + 30_000;
  while (runner.held.size < CONVERSATIONS) {
    if (Date.now() > deadline) throw new Error("the holding runs did not all start");
    await new Promise((r) => setTimeout(r, 10));
  }

  const acked: number[] = [];
  const visible: number[] = [];
  for (let i = 0; i < EVENTS + WARMUP; i++) {
    const conversation = `steer-${i % CONVERSATIONS}`;
    const eventId = `steer-bench-${i}`;
    const t0 = performance.now();
    const res = await adminCall<{ disposition: string }>(host, "POST", "/v1/events", message(conversation, `m${i}`, eventId));
    const t1 = performance.now();
    if (res.body.disposition !== "steered") throw new Error(`event ${i} was ${res.body.disposition}, not steered`);
    const items = await pull(runner.held.get(conversation)!);
    const t2 = performance.now();
    if (items.length !== 1 || items[0].event.event_id !== eventId) throw new Error(`pull after event ${i} returned ${JSON.stringify(items.map((x) => x.event.event_id))}`);
    if (i < WARMUP) continue;
    acked.push(t1 - t0);
    visible.push(t2 - t0);
  }

  runner.release();
  await host.dispose();
  runner.close();
  rmSync(dir, { recursive: true, force: true });
  return {
    benchmark: "steering-claim",
    events: EVENTS,
    conversations: CONVERSATIONS,
    ms: { ingress_to_steered_answer: stats(acked), ingress_to_returned_by_pull: stats(visible) },
  };
}
