import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, keyedGates } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The conversation around a run that is ending (cancelled, its runner done,
 * or its end being recorded). The database drill `{ delayMs, matching }` holds one libSQL
 * request whose SQL contains `matching`, to widen a window that is a round
 * trip wide in production. Every claimed message is pulled or recorded as dropped (PROTOCOL §10), also when its
 * claim is recorded while the run ends, or the run's pull fails after its end.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const started = new Map<string, string[]>();
const { gate, releaseAll } = keyedGates();
const startedTexts = (c: string) => started.get(c) ?? [];
/** What a "slow…" run answers: the test holds that final write in the database. */
const SLOW_REPLY = "ending-slow-final-reply-9c1e";

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "ending",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const c: string = ctx.conversation.conversation_id;
      const text: string = ctx.input.text ?? "";
      started.set(c, [...startedTexts(c), text]);
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      if (text === "report") {
        const page = await api("event.page", { limit: 100 });
        return w.reply(JSON.stringify(page.body.data.items));
      }
      if (text.startsWith("hold")) await gate(c).promise;
      if (text.startsWith("pullhold")) {
        // Pulls once let go, then waits again (the test refuses that pull's write after cancelling the run).
        await gate(c).promise;
        await api("steering.pull").catch(() => undefined);
        await gate(`${c}-after`).promise;
      }
      // A cancelled run's pull is refused (or its host is gone by then): nothing pulled.
      const pulled = ctx.config.pull === "all" ? await api("steering.pull").then((r) => r.body.data?.items ?? [], () => []) : [];
      if (text.startsWith("slow")) return w.reply(`${SLOW_REPLY} ${JSON.stringify(pulled.map((i: any) => i.input.text))}`);
      w.reply(JSON.stringify({ text, pulled: pulled.map((i: any) => i.input.text) }));
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  releaseAll();
  host?.databaseOutage(false);
  await host?.dispose();
  await steerer?.close();
});

async function agentFor(c: string, pull: "all" | "never") {
  const res = await host.admin("POST", "/v1/admin/agents", {
    agent_id: `agent-${c}`,
    name: c,
    runner_id: steerer.runnerId(),
    runner_config: { pull },
    event_types: ["message.received"],
    scope: { type: "conversation", id: c },
  });
  expect(res.status).toBe(201);
}

async function until(what: string, probe: () => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function eventLogOf(c: string): Promise<any[]> {
  const res = await host.postEvent(messageEvent(c, "report"));
  return JSON.parse((await host.waitForRun(res.body.run_id!)).message!.content as string);
}

describe("steering into a run that is already cancelled", () => {
  it("a message that arrives after the operator cancelled the active run is not absorbed into it (and lost)", async () => {
    const c = "steer-cancelled";
    await agentFor(c, "all");
    const first = await host.postEvent(messageEvent(c, "hold first"));
    await until("the first run to start", () => startedTexts(c).length === 1);

    // The cancelled run's terminal write takes a while (in production: one Turso round trip).
    host.databaseOutage({ delayMs: 2_000, matching: "run cancelled by an operator" });
    const cancel = await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`);
    expect(cancel.status).toBe(202);
    await new Promise((r) => setTimeout(r, 100));

    const second = await host.postEvent(messageEvent(c, "second", { event_id: "steer-cancelled-2" }));
    const firstEnded = await host.waitForRun(first.body.run_id!);
    expect(firstEnded.status).toBe("cancelled");
    // A cancelled run can never pull (its token is refused): the message waits for the next run instead of being lost.
    expect(second.body.disposition).toBe("queued");
    expect((await host.waitForRun(second.body.run_id!)).status).toBe("completed");
    expect(startedTexts(c)).toContain("second");
    const log = await eventLogOf(c);
    expect(log.filter((e) => e.event_type === "steering.dropped")).toEqual([]);
  });
});

describe("cancel of a run that has ended", () => {
  it("answers 409 once the run is completed, even while its unpulled claims are being recorded as dropped", async () => {
    const c = "cancel-ended";
    await agentFor(c, "never");
    const first = await host.postEvent(messageEvent(c, "hold"));
    await until("the first run to start", () => startedTexts(c).length === 1);
    expect((await host.postEvent(messageEvent(c, "extra"))).body.disposition).toBe("steered");

    host.databaseOutage({ delayMs: 2_000, matching: "steering.dropped" });
    gate(c).resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const cancel = await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`);
    expect(cancel.status).toBe(409);
  });
});

const statusOf = async (runId: string) => (await host.admin("GET", `/v1/runs/${runId}`)).body.status as string;

describe("cancel of a run that has already ended cancelled", () => {
  it("a second cancel, after the run's cancelled end is recorded, answers 409 with status cancelled (not 202 cancelling)", async () => {
    const c = "end-cancel-twice";
    await agentFor(c, "never");
    const first = await host.postEvent(messageEvent(c, "hold"));
    await until("the run to start", () => startedTexts(c).length === 1);
    // A claimed message the run never pulls: its steering.dropped record is written after the run's end.
    expect((await host.postEvent(messageEvent(c, "extra"))).body.disposition).toBe("steered");
    host.databaseOutage({ delayMs: 2_000, matching: "steering.dropped" });

    expect((await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`)).status).toBe(202);
    await waitFor(async () => (await statusOf(first.body.run_id!)) === "cancelled", 10_000, "the cancelled end to be recorded");

    const again = await host.admin("POST", `/v1/runs/${first.body.run_id}/cancel`);
    expect({ status: again.status, run_status: again.body.status }).toEqual({ status: 409, run_status: "cancelled" });
    gate(c).resolve();
  });
});

describe("a message that arrives while a completed run's end is being recorded", () => {
  it("is not claimed by that run (its runner has finished and can never pull it): it gets a run of its own", async () => {
    const c = "end-steer-finished";
    await agentFor(c, "all");
    // The finished run's last write (its reply and run.completed) takes a while, as one Turso round trip can.
    host.databaseOutage({ delayMs: 2_000, matching: SLOW_REPLY });
    const first = await host.postEvent(messageEvent(c, "slow first"));
    await until("the first run to start", () => startedTexts(c).length === 1);
    await new Promise((r) => setTimeout(r, 500));

    const second = await host.postEvent(messageEvent(c, "second", { event_id: "end-steer-finished-2" }));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    // Its own run starts once the first has ended (not at once: under load, a moment after the first reads completed).
    await host.waitForRun(second.body.run_id!);
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped' AND conversation_id = ?", [c]);
    expect({ disposition: second.body.disposition, dropped: Number(dropped[0].n), started: startedTexts(c) }).toEqual({ disposition: "queued", dropped: 0, started: ["slow first", "second"] });
  });
});

describe("a claim recorded while the claiming run's earlier drops are being recorded", () => {
  it("the late-claimed message, which the ended run never had, is taken back and run as its own (not left in a dead run's queue, lost)", async () => {
    const c = "rv-claim-during-drop";
    await agentFor(c, "never");
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
    // A: claimed at once (never pulled: dropped at the run's end, a libSQL write).
    expect((await host.postEvent(messageEvent(c, "a", { event_id: `${c}-a` }))).body.disposition).toBe("steered");

    // B: its claim's libSQL write takes a while (one slow round trip).
    host.databaseOutage({ delayMs: 2_000, matching: "absorbed_into_active_run" });
    const second = host.postEvent(messageEvent(c, "b", { event_id: `${c}-b` }));
    await new Promise((r) => setTimeout(r, 400));
    // The run ends meanwhile; its drop record for A is slow too.
    host.databaseOutage({ delayMs: 3_500, matching: "steering.dropped" });
    gate(c).resolve();

    // B's claim is recorded after the run stopped pulling: taken back, B is decided again (README "Steering") and runs.
    const answer = (await second).body;
    expect(["started", "queued"]).toContain(answer.disposition);
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    expect((await host.waitForRun(answer.run_id!)).status).toBe("completed");
    expect(startedTexts(c).slice(0, 2)).toEqual(["hold", "b"]);
    const droppedNow = () =>
      host.query<{ src: string; run: string }>("SELECT json_extract(data_json, '$.source_event_id') AS src, run_id AS run FROM event_log WHERE event_type = 'steering.dropped' AND conversation_id = ? ORDER BY seq", [c]);
    // Every write settles: A, which the run held, ends recorded as dropped; then it is decided anew and answered
    // (README "Steering"; B's run, which never pulls either, may claim and drop it first).
    await waitFor(async () => (await droppedNow()).length >= 1, 15_000, "A recorded as dropped");
    const ownA = await (async () => {
      await waitFor(async () => (await host.admin("GET", `/v1/events/${c}-a`)).body.disposition === "bound", 15_000, "A decided anew");
      return (await host.admin("GET", `/v1/events/${c}-a`)).body.run_id as string;
    })();
    expect((await host.waitForRun(ownA)).status).toBe("completed");
    const dropped = await droppedNow();
    const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected' AND conversation_id = ?", [c]);
    expect({ first: dropped[0], others: dropped.filter((d) => d.src !== `${c}-a`), injected: Number(injected[0].n) }).toEqual({ first: { src: `${c}-a`, run: first.body.run_id }, others: [], injected: 0 });
    expect(startedTexts(c)).toEqual(["hold", "b", "a"]);
  }, 30_000);
});

describe("a steering.pull whose injected write fails after its run was cancelled", () => {
  it("the message it had taken is recorded as dropped (not put back into the ended run's queue, lost)", async () => {
    const c = "rv-pull-fails-after-end";
    await agentFor(c, "never");
    const first = await host.postEvent(messageEvent(c, "pullhold"));
    await waitFor(() => startedTexts(c).length === 1, 10_000, "the first run to start");
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
    await waitFor(async () => (await outcomesNow()).length > 0, 15_000, "the message's outcome");
    gate(`${c}-after`).resolve();
    const outcomes = await outcomesNow();
    expect(outcomes).toEqual([{ t: "steering.dropped", src: `${c}-b` }]);
  }, 30_000);
});
