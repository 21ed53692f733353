import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { listenLoopback } from "../support/http-server";

/**
 * The run lifecycle at its edges: claimed messages whose drop cannot be
 * recorded at once, runs that arrive out of their ingress order, results
 * whose sequence comes very late. Each conversation gets a behaviour
 * registered by its test.
 */
type Behaviour = (ctx: any, res: ServerResponse) => void | Promise<void>;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const behaviours = new Map<string, Behaviour>();
const seen = new Map<string, { runId: string; token: string; baseUrl: string; text: string }[]>();

const steeringManifest = [
  { name: "default", label: { en_US: "edges" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"], history: ["page"] } },
];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "edges",
    runners: steeringManifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const conv = ctx.conversation.conversation_id as string;
      seen.set(conv, [...(seen.get(conv) ?? []), { runId: ctx.run_id, token: ctx.runtime.api.token, baseUrl: ctx.runtime.api.base_url, text: ctx.input.text }]);
      const b = behaviours.get(conv);
      if (b) return b(ctx, res);
      resultWriter(res, ctx.run_id).reply(`echo: ${ctx.input.text}`);
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: "3000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

async function agentFor(conversation: string, concurrency: Record<string, unknown> = {}) {
  const res = await host.admin("POST", "/v1/admin/agents", {
    agent_id: `agent-${conversation}`,
    name: conversation,
    runner_id: runner.runnerId(),
    event_types: ["message.received"],
    scope: { type: "conversation", id: conversation },
    concurrency,
  });
  expect(res.status).toBe(201);
}

async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A run of its own agent held until `release`, with a second message claimed into it (steered). */
async function heldRunWithClaim(conversation: string) {
  await agentFor(conversation);
  const release = deferred();
  behaviours.set(conversation, async (ctx, res) => {
    const w = resultWriter(res, ctx.run_id);
    if (ctx.input.text === "hold") await release.promise;
    w.reply(`done: ${ctx.input.text}`);
  });
  const first = await host.postEvent(messageEvent(conversation, "hold"));
  await until("started", () => seen.get(conversation)?.length);
  const second = await host.postEvent(messageEvent(conversation, "claimed"));
  expect(second.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
  return { first, second, release };
}

const stream = (runId: string) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });

/** Read an SSE stream with a time limit: null when it has not ended by then. */
async function readSseWithin(res: Response, ms: number) {
  const timer = new Promise<null>((r) => setTimeout(() => r(null), ms));
  return Promise.race([readSse(res), timer]);
}

describe("a cancelled queued run whose steering drop cannot be recorded at once", () => {
  it("still ends its stream (cancelled) and answers the cancel 202", async () => {
    const conv = "edge-cancel-drop";
    await agentFor(conv, { debounce_ms: 4000 });
    const first = await host.postEvent(messageEvent(conv, "first"));
    const runId = first.body.run_id!;
    const second = await host.postEvent(messageEvent(conv, "second"));
    expect(second.body).toMatchObject({ disposition: "steered", run_id: runId });
    const s = await stream(runId);
    host.databaseOutage({ queries: 1, matching: "steering.dropped" });
    const cancel = await host.admin("POST", `/v1/runs/${runId}/cancel`);
    // The cancel itself took effect: the run is cancelled in the run table.
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    const sse = await readSseWithin(s, 8_000);
    expect({ cancel: cancel.status, end: sse?.end ?? "never ended" }).toEqual({ cancel: 202, end: "cancelled" });
  });
});

describe("a run whose steering drop fails once", () => {
  it("records steering.dropped for its unpulled claim eventually", async () => {
    const conv = "edge-run-drop";
    const { first, second, release } = await heldRunWithClaim(conv);
    host.databaseOutage({ queries: 1, matching: "steering.dropped" });
    release.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    // The next activity in the conversation (or the alarm, after a pause) records it; once.
    const third = await host.postEvent(messageEvent(conv, "later"));
    expect((await host.waitForRun(third.body.run_id!)).status).toBe("completed");
    const droppedOf = () => host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'steering.dropped' AND run_id = ?", [first.body.run_id]);
    const dropped = await until("the drop record", async () => (await droppedOf()).length > 0 && droppedOf());
    expect(dropped.map((r) => JSON.parse(r.data_json).source_event_id)).toEqual([second.body.event_id]);
  });
});

describe("a run of an idle conversation cancelled before the scheduler starts it", () => {
  it("ends cancelled while the scheduler is busy elsewhere, and the runner never hears of it", async () => {
    const conv = "edge-cancel-claimed-ahead";
    const { first, release } = await heldRunWithClaim(conv);
    // The run's own drop of its unpulled claim is slow, then fails; the scheduler's retry is slow again: while it
    // waits, the scheduler starts nothing, so the next run stays queued (and unclaimed: the start is not imminent).
    host.databaseOutage({ queries: 1, matching: "steering.dropped" });
    host.databaseOutage({ delayMs: 1500, queries: 2, matching: "steering.dropped" });
    release.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    await new Promise((r) => setTimeout(r, 1800));
    const next = await host.postEvent(messageEvent(conv, "cancel me"));
    expect(next.body.disposition).toBe("started");
    const cancel = await host.admin("POST", `/v1/runs/${next.body.run_id}/cancel`);
    const after = await host.postEvent(messageEvent(conv, "after"));
    const outcome = {
      cancel: cancel.status,
      cancelled: (await host.waitForRun(next.body.run_id!)).status,
      after: (await host.waitForRun(after.body.run_id!)).status,
    };
    // The claimed message its run never pulled is answered too, once its drop is recorded (decided anew), whenever
    // that lands against "after"; the cancelled one never reaches the runner.
    await until("the dropped claim answered", () => seen.get(conv)?.some((r) => r.text === "claimed"));
    const runnerHeard = seen.get(conv)!.map((r) => r.text);
    expect({ ...outcome, runnerHeard: [...runnerHeard].sort() }).toEqual({ cancel: 202, cancelled: "cancelled", after: "completed", runnerHeard: ["after", "claimed", "hold"] });
  });
});

describe("a run of an idle conversation whose claim, made as it is dispatched, the database refuses", () => {
  it("ends as the host's failure without its runner being called, and the next message runs", async () => {
    const conv = "edge-early-claim-refused";
    await agentFor(conv);
    // The claim is the one query that sets started_at.
    host.databaseOutage({ queries: 1, matching: "started_at" });
    const refused = await host.postEvent(messageEvent(conv, "refused"));
    expect(refused.body.disposition).toBe("started");
    expect(await host.waitForRun(refused.body.run_id!)).toMatchObject({ status: "failed", error: { code: "host.internal_error" } });
    const next = await host.postEvent(messageEvent(conv, "next"));
    expect((await host.waitForRun(next.body.run_id!)).status).toBe("completed");
    expect(seen.get(conv)!.map((r) => r.text)).toEqual(["next"]);
  });
});

describe("enqueue order against dispositions", () => {
  it("the run answered started runs before the one answered queued (an event slow at ingress does not overtake)", async () => {
    const conv = "edge-order";
    await agentFor(conv, { strategy: "enqueue", debounce_ms: 1000 });
    const hold = deferred();
    const files = await listenLoopback(async (_req, res) => {
      await hold.promise;
      res.writeHead(200, { "content-type": "text/plain" }).end("hello file");
    });
    try {
      // A: its ingress starts first, but fetching its attachment takes a while.
      const a = host.postEvent(messageEvent(conv, "A (slow ingress)", { input: { text: "A (slow ingress)", attachments: [{ url: `${files.url}/a.txt` }] } }));
      await new Promise((r) => setTimeout(r, 200));
      // B: reaches the conversation first.
      const b = await host.postEvent(messageEvent(conv, "B"));
      hold.resolve();
      const aa = await a;
      expect(aa.status).toBe(202);
      const answers = { A: aa.body.disposition, B: b.body.disposition };
      await host.waitForRun(aa.body.run_id!);
      await host.waitForRun(b.body.run_id!);
      const order = seen.get(conv)!.map((r) => r.text);
      // B was answered "started" and A "queued" (decided in that order): the runs must follow those answers.
      expect(answers).toEqual({ A: "queued", B: "started" });
      expect(order).toEqual(["B", "A (slow ingress)"]);
    } finally {
      hold.resolve();
      await files.close();
    }
  });
});

describe("reordered sequences", () => {
  it("a late result whose sequence was never seen is applied (reordered), not dropped as a duplicate", async () => {
    const conv = "edge-late-seq";
    await agentFor(conv);
    behaviours.set(conv, (ctx, res) => {
      const w = resultWriter(res, ctx.run_id);
      // Sequence 1, then 2 is held back while 3..1100 (telemetry) go out; then 2 arrives, then the end.
      w.send("tool.call.started", { tool_call_id: "c1", tool_name: "t", parameters: {} }, 1);
      for (let s = 3; s <= 1100; s++) w.send("tool.call.started", { tool_call_id: `c${s}`, tool_name: "t", parameters: {} }, s);
      w.send("message.completed", { message: { role: "assistant", content: "the late answer" } }, 2);
      w.send("run.completed", { finish_reason: "stop" }, 1101);
      res.end();
    });
    const ev = await host.postEvent(messageEvent(conv, "go"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect({ status: run.status, code: run.error?.code, message: run.message?.content }).toEqual({ status: "completed", code: undefined, message: "the late answer" });
  });
});
