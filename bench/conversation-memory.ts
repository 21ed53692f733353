/**
 * `npm run bench:memory`: whether a long-lived conversation's Durable Object, and the Worker isolate, keep memory per
 * run. MEMORY_CYCLES cycles run through ONE conversation: a steering run with two followers (one leaves after its
 * first frame) and two claimed messages (one pulled, one dropped at its end); an interrupt; an operator's cancel of a
 * running run and of a queued one; a parallel run and a failing one; every 5th cycle a run stopped at its deadline,
 * every 3rd one whose end meets a database failing its next writes; and a Telegram chat's message through a bot on a
 * fake Bot API. Then MEMORY_CONVERSATIONS conversations of one run each, then MEMORY_IDLE_MS of quiet. At checkpoints
 * workerd's heap is read through its inspector after full GCs. Prints one JSON document; exits 1 if a per-run object
 * outlives its run, the run ids still held or the live Errors grow with the runs, or an object's storage keeps keys
 * once idle.
 */
import type { ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHost } from "../local/host";
import { adminCall } from "../local/setup";
import { connectInspector, growth, type HeapReport } from "./heap";
import { resultWriter, startAdHocRunner, type RunCall } from "../test/support/runner";
import { callHostApi } from "../test/support/host-api";
import { storedKeys } from "../test/support/do-storage";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../test/support/fake-platform";
import { freePort } from "./ports";

const CYCLES = Number(process.env.MEMORY_CYCLES ?? 60);
const MANY = Number(process.env.MEMORY_CONVERSATIONS ?? 100);
const IDLE_MS = Number(process.env.MEMORY_IDLE_MS ?? 75_000);
const CHECKPOINTS = new Set([4, Math.round(CYCLES / 4), Math.round(CYCLES / 2), Math.round((3 * CYCLES) / 4), CYCLES]);
/** Objects that exist per run (or per follower): none may be left once the runs have ended. */
const PER_RUN = ["RunSession", "Subscriber", "DeliverySession", "LedgerSequence", "McpSessionPool", "OpenStreams"];
/** A conversation's object (it extends DurableObject, so the snapshot names it by its LiveHub). */
const NAMES = ["LiveHub", ...PER_RUN, "AbortController", "ReadableStream", "Promise", "Map", "Error"];
const RUN_ID = /run_[0-9a-f]{64}_[0-9a-z]{8,40}/g;
/** Live Errors allowed past the first checkpoint's count: the host keeps none per run (the inspector's are discarded first, bench/heap.ts). */
const ERRORS_GROWTH_ALLOWED = 4;



/** `hold <key>` runs wait until `release(key)` (or until their request is broken off), then pull one claim; `fail` fails. */
const gates = new Map<string, () => void>();
const started = new Set<string>();
const release = (key: string) => gates.get(key)?.();
async function onRun({ body }: RunCall, res: ServerResponse) {
  const ctx = body.context;
  const text = String(ctx.input.text ?? "");
  const w = resultWriter(res, ctx.run_id);
  if (text.startsWith("fail ")) {
    w.send("run.failed", { code: "runner.crashed", error: "gave up", retryable: false });
    return void res.end();
  }
  if (text.startsWith("hold ")) {
    const key = text.slice(5);
    w.send("message.delta", { chunk: { role: "assistant", content: `holding ${key}` } });
    await new Promise<void>((r) => {
      gates.set(key, r);
      res.once("close", r);
      started.add(key);
    });
    if (res.destroyed || res.writableEnded) return;
    if (ctx.available_apis?.steering_pull) await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "one-at-a-time" });
  }
  if (!res.destroyed) w.reply(`re: ${text}`);
}

const dir = mkdtempSync(join(tmpdir(), "agent-host-memory-"));
const inspectorPort = await freePort();
const caps = (steering: boolean) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: {} }];
const steerer = await startAdHocRunner({ name: "steerer", runners: caps(true), onRun });
const plain = await startAdHocRunner({ name: "plain", runners: caps(false), onRun });
const botToken = "123456:memory-bench-token";
const secretToken = "memory-bench-secret-0123";
const platform = await startFakePlatform(telegramBotApi(botToken));
// Persisted, so the objects' storage can be read; a short deadline stops a hanging run within its cycle.
const host = await startHost({ adminToken: "memory-admin-token-0123456789", dataDir: dir, inspectorPort, vars: { RUN_DEADLINE_MS: "4000", RUN_WATCHDOG_INTERVAL_MS: "1000" }, onRuntimeOutput: () => {} });
const admin = <T = unknown>(method: string, path: string, body?: unknown) => adminCall<T>(host, method, path, body);
const report: Record<string, unknown>[] = [];
const failures: string[] = [];
let inspector: Awaited<ReturnType<typeof connectInspector>> | undefined;
let previous: HeapReport | undefined;
let firstErrors: number | undefined;

/** A checkpoint: the heap after full GCs, what grew since the last one, and what must not be there. */
async function checkpoint(facts: Record<string, unknown>) {
  await new Promise((r) => setTimeout(r, 1500));
  const heap = await inspector!.report(NAMES, RUN_ID);
  // inspector_console: what V8's inspector had kept since the last checkpoint (two "Network connection lost." per
  // follower that left mid-stream), discarded before the heap was read.
  report.push({ ...facts, heap_used_bytes: heap.usedBytes, live: heap.counts, run_ids_held: heap.runIds.length, held_paths: heap.paths, inspector_console: heap.inspectorConsole, grew: previous && growth(previous, heap) });
  for (const name of PER_RUN) if (heap.counts[name] > 0) failures.push(`${JSON.stringify(facts)}: ${heap.counts[name]} ${name} left`);
  firstErrors ??= heap.counts.Error;
  if (heap.counts.Error > firstErrors + ERRORS_GROWTH_ALLOWED) failures.push(`${JSON.stringify(facts)}: ${heap.counts.Error} live Errors, ${firstErrors} at the first checkpoint`);
  // Each object keeps the last decision it took (SerialDecisions' tail): at most one run id per live object.
  if (heap.runIds.length > heap.counts.LiveHub) failures.push(`${JSON.stringify(facts)}: ${heap.runIds.length} run ids held by ${heap.counts.LiveHub} objects: ${heap.paths.join(" | ")}`);
  previous = heap;
}

try {
  for (const r of [steerer, plain]) await admin("POST", "/v1/admin/runner-services", { base_url: r.url });
  const C = "busy";
  const agent = (id: string, runner: typeof steerer, types: string[], strategy: string, scope: object = { type: "conversation", id: C }) =>
    admin("POST", "/v1/admin/agents", { agent_id: id, name: id, runner_id: runner.runnerId(), event_types: types, scope, concurrency: { strategy } });
  await agent("chat", steerer, ["message.received"], "steer");
  await agent("jobs", plain, ["api.invoked"], "interrupt");
  await agent("sched", plain, ["schedule.triggered"], "enqueue");
  await agent("par", plain, ["group.member_joined"], "parallel");
  await agent("everywhere", plain, ["api.invoked"], "enqueue", { type: "global" });
  const bot = await admin<{ bot_id: string; webhook_url: string }>("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: platform.url, credentials: { bot_token: botToken, secret_token: secretToken } });
  await agent("tg", plain, ["message.received"], "enqueue", { type: "bot", id: bot.body.bot_id });
  inspector = await connectInspector(inspectorPort, () => fetch(`${host.url}/healthz`).then((r) => r.arrayBuffer()));

  const event = async (type: string, text: string, conversation = C) =>
    (await admin<{ run_id: string | null; disposition: string }>("POST", "/v1/events", { event_type: type, conversation_id: conversation, actor: { actor_type: "user", actor_id: "u1" }, input: { text } })).body;
  const ended = (runId: string, timeoutMs = 20_000) =>
    waitFor(async () => ["completed", "failed", "cancelled", "timeout"].includes((await admin<{ status: string }>("GET", `/v1/runs/${runId}`)).body.status), timeoutMs, `run ${runId} to end`);
  const follow = (runId: string, leaveEarly: boolean) => {
    const abort = new AbortController();
    return fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` }, signal: abort.signal })
      .then(async (res) => {
        const reader = res.body!.getReader();
        await reader.read();
        if (leaveEarly) return abort.abort();
        while (!(await reader.read()).done);
      })
      .catch(() => undefined);
  };
  const held = async (key: string, type = "message.received") => {
    const run = await event(type, `hold ${key}`);
    await waitFor(() => started.has(key), 10_000, `run ${key} to start`);
    return run.run_id!;
  };
  let runs = 0;

  for (let cycle = 1; cycle <= CYCLES; cycle++) {
    const a = await held(`a${cycle}`);
    const followers = [follow(a, true), follow(a, false)];
    for (const m of ["x", "y"]) {
      const steered = await event("message.received", `${m}${cycle}`);
      if (steered.disposition !== "steered") throw new Error(`expected steered, got ${JSON.stringify(steered)}`);
    }
    release(`a${cycle}`);
    await ended(a);
    await Promise.all(followers);
    // The second api event interrupts the first.
    const b = await held(`b${cycle}`, "api.invoked");
    const b2 = await event("api.invoked", `quick b${cycle}`);
    await Promise.all([ended(b), ended(b2.run_id!)]);
    const c = await held(`c${cycle}`);
    await admin("POST", `/v1/runs/${c}/cancel`);
    await ended(c);
    // A notification queued behind a held run, cancelled; a parallel run and a failing one beside it.
    const d = await held(`d${cycle}`);
    const queued = await event("schedule.triggered", `quick q${cycle}`);
    await admin("POST", `/v1/runs/${queued.run_id}/cancel`);
    const others = [await event("group.member_joined", `quick p${cycle}`), await event("api.invoked", `fail f${cycle}`)];
    release(`d${cycle}`);
    await Promise.all([d, queued.run_id!, ...others.map((o) => o.run_id!)].map((id) => ended(id)));
    runs += 9;
    if (cycle % 5 === 0) {
      await ended(await held(`h${cycle}`, "api.invoked"));
      runs++;
    }
    if (cycle % 3 === 0) {
      const f = await held(`f${cycle}`);
      host.databaseOutage({ queries: 2 });
      release(`f${cycle}`);
      await ended(f, 60_000);
      runs++;
    }
    const sent = platform.callsTo(/sendMessage$/).length;
    await sayOnTelegram(bot.body.webhook_url, secretToken, "-1001", `quick t${cycle}`);
    await waitFor(() => platform.callsTo(/sendMessage$/).length > sent, 10_000, "the Telegram answer");
    runs++;
    if (CHECKPOINTS.has(cycle)) await checkpoint({ phase: "one conversation", cycle, runs });
  }
  const oneConversation = report.filter((r) => r.phase === "one conversation") as { runs: number; heap_used_bytes: number }[];
  const [half, last] = [oneConversation[Math.floor(oneConversation.length / 2)], oneConversation.at(-1)!];
  report.push({ phase: "one conversation, second half", heap_bytes_per_run: Math.round((last.heap_used_bytes - half.heap_used_bytes) / (last.runs - half.runs)) });

  for (let i = 1; i <= MANY; i++) {
    const r = await event("api.invoked", `quick m${i}`, `many-${i}`);
    await ended(r.run_id!);
    if (i === Math.round(MANY / 3) || i === MANY) await checkpoint({ phase: "many conversations", conversations: i });
  }
  if (IDLE_MS > 0) {
    // Idle: workerd lets go of the objects no request uses; what they held goes with them.
    await new Promise((r) => setTimeout(r, IDLE_MS));
    await checkpoint({ phase: "idle", idle_ms: IDLE_MS });
  }
  const keys = storedKeys(join(dir, "do"));
  report.push({ phase: "storage", keys_by_prefix: keys });
  if (Object.keys(keys).length) failures.push(`keys left in the objects' storage: ${JSON.stringify(keys)}`);
  report.push({ failures });
  console.log(JSON.stringify(report, null, 2));
  if (failures.length) process.exitCode = 1;
} finally {
  inspector?.close();
  for (const g of gates.values()) g();
  await host.dispose();
  await Promise.all([steerer.close(), plain.close(), platform.close()]);
  rmSync(dir, { recursive: true, force: true });
}
