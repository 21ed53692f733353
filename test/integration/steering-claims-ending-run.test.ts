/**
 * PROTOCOL §10: every claimed message is pulled (`steering.injected`) or, when its run ends without pulling it,
 * recorded as `steering.dropped`. Two ends of a run that used to lose one: a claim recorded while the run's drops
 * are being written, and a pull whose write fails after the run ended (it put the message back in a dead queue).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const started = new Map<string, string[]>();
const gate = (c: string) => {
  if (!gates.has(c)) gates.set(c, deferred());
  return gates.get(c)!;
};
const startedTexts = (c: string) => started.get(c) ?? [];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "rvclaim",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const c: string = ctx.conversation.conversation_id;
      const text: string = ctx.input.text ?? "";
      started.set(c, [...startedTexts(c), text]);
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      if (text.startsWith("hold")) await gate(c).promise;
      if (text.startsWith("pullhold")) {
        await gate(c).promise;
        await api("steering.pull").catch(() => undefined);
        await gate(`${c}-after`).promise;
      }
      const pulled = ctx.config.pull === "all" ? await api("steering.pull").then((r) => r.body.data?.items ?? [], () => []) : [];
      w.reply(JSON.stringify({ text, pulled: pulled.map((i: any) => i.input.text) }));
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await steerer?.close();
});

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("a claim recorded while the claiming run's earlier drops are being recorded", () => {
  it("the late-claimed message is recorded as steering.dropped (not left in a dead run's queue, lost)", async () => {
    const c = "rv-claim-during-drop";
    const res = await host.admin("POST", "/v1/admin/agents", {
      agent_id: `agent-${c}`, name: c, runner_id: steerer.runnerId(), runner_config: { pull: "never" },
      event_types: ["message.received"], scope: { type: "conversation", id: c },
    });
    expect(res.status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "hold"));
    await until("the first run to start", () => startedTexts(c).length === 1);
    // A: claimed at once (never pulled: dropped at the run's end, a libSQL write).
    expect((await host.postEvent(messageEvent(c, "a", { event_id: `${c}-a` }))).body.disposition).toBe("steered");

    // B: its claim's libSQL write takes a while (one slow round trip).
    host.databaseOutage({ delayMs: 2_000, matching: "absorbed_into_active_run" });
    const second = host.postEvent(messageEvent(c, "b", { event_id: `${c}-b` }));
    await new Promise((r) => setTimeout(r, 400));
    // The run ends meanwhile; its drop record for A is slow too.
    host.databaseOutage({ delayMs: 3_500, matching: "steering.dropped" });
    gate(c).resolve();

    expect((await second).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const droppedNow = () =>
      host.query<{ src: string }>("SELECT json_extract(data_json, '$.source_event_id') AS src FROM event_log WHERE event_type = 'steering.dropped' AND conversation_id = ? ORDER BY seq", [c]);
    // Every write settles: both claims end recorded (before the fix, B stayed in the ended run's queue for good).
    await until("both claims recorded as dropped", async () => (await droppedNow()).length >= 2, 15_000);
    const dropped = await droppedNow();
    const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected' AND conversation_id = ?", [c]);
    expect({ dropped: dropped.map((d) => d.src).sort(), injected: Number(injected[0].n) }).toEqual({ dropped: [`${c}-a`, `${c}-b`], injected: 0 });
  }, 30_000);
});

describe("a steering.pull whose injected write fails after its run was cancelled", () => {
  it("the message it had taken is recorded as dropped (not put back into the ended run's queue, lost)", async () => {
    const c = "rv-pull-fails-after-end";
    const res = await host.admin("POST", "/v1/admin/agents", {
      agent_id: `agent-${c}`, name: c, runner_id: steerer.runnerId(), runner_config: { pull: "never" },
      event_types: ["message.received"], scope: { type: "conversation", id: c },
    });
    expect(res.status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "pullhold"));
    await until("the first run to start", () => startedTexts(c).length === 1);
    expect((await host.postEvent(messageEvent(c, "b", { event_id: `${c}-b` }))).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });

    // The pull's steering.injected write is slow, then refused (a blip).
    host.databaseOutage({ delayMs: 3_000, matching: "steering.injected" });
    host.databaseOutage({ queries: 1, matching: "steering.injected" });
    gate(c).resolve();
    await new Promise((r) => setTimeout(r, 400));
    expect((await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("cancelled");
    const outcomesNow = () =>
      host.query<{ t: string; src: string }>(
        "SELECT event_type AS t, json_extract(data_json, '$.source_event_id') AS src FROM event_log WHERE event_type IN ('steering.dropped', 'steering.injected') AND conversation_id = ? ORDER BY seq",
        [c],
      );
    // The pull's write is refused after the run's end: what it took is recorded as dropped (before the fix, put back and never recorded).
    await until("the message's outcome", async () => (await outcomesNow()).length > 0, 15_000);
    gate(`${c}-after`).resolve();
    const outcomes = await outcomesNow();
    expect(outcomes).toEqual([{ t: "steering.dropped", src: `${c}-b` }]);
  }, 30_000);
});
