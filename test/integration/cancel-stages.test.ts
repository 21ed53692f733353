import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent, runLedger } from "../support/scripted-runner";

/** POST /v1/runs/{id}/cancel at each stage of a run: it ends once, with one ledger end and one EventLog record, and the conversation goes on. */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = new Map<string, ReturnType<typeof deferred<void>>>();
const heard: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "cancel-stages",
    runners: [
      { name: "default", label: { en_US: "cancel-stages" }, capabilities: { streaming: true }, permissions: { history: ["page"] } },
      { name: "steers", label: { en_US: "cancel-stages steering" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } },
    ],
    async onRun({ body }, res) {
      const ctx = body.context;
      heard.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      const hold = holds.get(ctx.input.text);
      if (hold) await hold.promise;
      if (ctx.input.text.startsWith("ending")) {
        w.send("message.completed", { message: { role: "assistant", content: "FINAL-ANSWER-ENDING" } });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      w.reply(`re: ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  await host?.dispose();
  await runner?.close();
});

async function facts(runId: string) {
  const ledger = await runLedger(host, runId);
  const records = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE run_id = ? AND event_type = 'run.failed'", [runId]);
  const run = (await host.admin("GET", `/v1/runs/${runId}`)).body;
  return { status: run.status, code: run.error?.code ?? null, ends: ledger.filter((e) => e.type === "run.failed" || e.type === "run.completed").length, records: Number(records[0].n) };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An event whose run ingress has recorded (`created`) while the database's answer to that write is slow, so its
 * hand-over to the conversation's object comes after an operator's cancel of the run.
 */
async function cancelBeforeHandOver(c: string, text: string) {
  const eventId = `evt-${c}`;
  host.databaseOutage({ answerDelayMs: 1_500, matching: text });
  const posting = host.postEvent(messageEvent(c, text, { event_id: eventId }));
  let runId: string | undefined;
  while (!(runId = (await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE event_id = ?", [eventId]))[0]?.run_id)) await pause(10);
  const cancel = await host.admin("POST", `/v1/runs/${runId}/cancel`);
  return { runId, eventId, cancel, posted: await posting };
}

const follow = (runId: string) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }).then(readSse);

describe("cancel at each stage", () => {
  it("created, never handed over", async () => {
    const c = "cs-unhanded";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const lost = await unhandedRun(host, c, "evt-cs-unhanded");
    const sse = follow(lost);
    const cancel = await host.admin("POST", `/v1/runs/${lost}/cancel`);
    // Ended by the cancel itself: the answer says so, and GET shows it at once.
    expect([cancel.status, cancel.body]).toEqual([202, { run_id: lost, cancelled: true, status: "cancelled" }]);
    expect(await facts(lost)).toEqual({ status: "cancelled", code: "cancelled", ends: 1, records: 1 });
    expect((await sse).end).toBe("cancelled");
    const again = await host.admin("POST", `/v1/runs/${lost}/cancel`);
    expect([again.status, again.body.status]).toEqual([409, "cancelled"]);
    const next = await host.postEvent(messageEvent(c, "cs-unhanded next"));
    expect((await host.waitForRun(next.body.run_id!)).status).toBe("completed");
  });

  it("created, its hand-over on its way: the run stays cancelled and its event starts nothing", async () => {
    const c = "cs-before-handover";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const { runId, cancel, posted } = await cancelBeforeHandOver(c, `${c} go`);
    expect([cancel.status, cancel.body.status, (await host.admin("GET", `/v1/runs/${runId}`)).body.status]).toEqual([202, "cancelled", "cancelled"]);
    // Dropped while it was queued: the event's answer says so, not that it started.
    expect(posted.body).toMatchObject({ run_id: runId, disposition: "queued" });
    const next = await host.postEvent(messageEvent(c, `${c} next`));
    expect((await host.waitForRun(next.body.run_id!, 10_000)).status).toBe("completed");
    expect(await facts(runId)).toEqual({ status: "cancelled", code: "cancelled", ends: 1, records: 1 });
    expect(heard).not.toContain(`${c} go`);
  });

  it("created, its hand-over on its way: its event neither interrupts the active run nor is steered into it", async () => {
    for (const [c, runnerName, concurrency] of [["cs-bh-interrupt", "default", { strategy: "interrupt" }], ["cs-bh-steer", "steers", { strategy: "steer" }]] as const) {
      await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(runnerName), scope: { type: "conversation", id: c }, concurrency });
      const hold = deferred<void>();
      holds.set(`${c} busy`, hold);
      const busy = await host.postEvent(messageEvent(c, `${c} busy`));
      while (!heard.includes(`${c} busy`)) await pause(10);
      const { runId, eventId, cancel, posted } = await cancelBeforeHandOver(c, `${c} cancelled`);
      expect([cancel.status, cancel.body.status]).toEqual([202, "cancelled"]);
      await pause(300);
      hold.resolve();
      const busyEnd = (await host.waitForRun(busy.body.run_id!, 10_000)).status;
      const event = (await host.admin("GET", `/v1/events/${eventId}`)).body;
      expect({ c, busyEnd, answer: posted.body.disposition, answerRun: posted.body.run_id, event: event.disposition, eventRun: event.run_id }).toEqual({
        c,
        busyEnd: "completed",
        answer: "queued",
        answerRun: runId,
        event: "bound",
        eventRun: runId,
      });
      expect(await facts(runId)).toEqual({ status: "cancelled", code: "cancelled", ends: 1, records: 1 });
    }
  });

  it("queued behind a busy run, and in its debounce window", async () => {
    for (const [c, concurrency] of [["cs-queued", { strategy: "enqueue" }], ["cs-debounce", { strategy: "enqueue", debounce_ms: 3000 }]] as const) {
      await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency });
      const hold = deferred<void>();
      holds.set(`${c} busy`, hold);
      const busy = await host.postEvent(messageEvent(c, `${c} busy`));
      const waiting = await host.postEvent(messageEvent(c, `${c} waiting`));
      const sse = follow(waiting.body.run_id!);
      const cancel = await host.admin("POST", `/v1/runs/${waiting.body.run_id}/cancel`);
      // It never started: cancelled, not "cancelling", and so at once on GET.
      expect([cancel.status, cancel.body.status, (await host.admin("GET", `/v1/runs/${waiting.body.run_id}`)).body.status]).toEqual([202, "cancelled", "cancelled"]);
      const next = await host.postEvent(messageEvent(c, `${c} next`));
      hold.resolve();
      expect((await host.waitForRun(busy.body.run_id!, 10_000)).status).toBe("completed");
      expect((await host.waitForRun(next.body.run_id!, 10_000)).status).toBe("completed");
      expect(await facts(waiting.body.run_id!)).toEqual({ status: "cancelled", code: "cancelled", ends: 1, records: 1 });
      expect((await sse).end).toBe("cancelled");
      expect(heard).not.toContain(`${c} waiting`);
    }
  });

  it("running", async () => {
    const c = "cs-running";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const hold = deferred<void>();
    holds.set(`${c} hold`, hold);
    const run = await host.postEvent(messageEvent(c, `${c} hold`));
    const queued = await host.postEvent(messageEvent(c, `${c} queued`));
    while (!heard.includes(`${c} hold`)) await new Promise((r) => setTimeout(r, 10));
    const sse = follow(run.body.run_id!);
    const cancel = await host.admin("POST", `/v1/runs/${run.body.run_id}/cancel`);
    // Its runner is being stopped: the end comes once the abort lands.
    expect([cancel.status, cancel.body]).toEqual([202, { run_id: run.body.run_id, cancelled: true, status: "cancelling" }]);
    expect((await host.waitForRun(run.body.run_id!)).status).toBe("cancelled");
    expect(await facts(run.body.run_id!)).toEqual({ status: "cancelled", code: "cancelled", ends: 1, records: 1 });
    expect((await sse).end).toBe("cancelled");
    expect((await host.waitForRun(queued.body.run_id!, 10_000)).status).toBe("completed");
    hold.resolve();
  });

  it("ending: its terminal result sent, its final write slow", async () => {
    const c = "cs-ending";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    host.databaseOutage({ delayMs: 1500, matching: "FINAL-ANSWER-ENDING" });
    const run = await host.postEvent(messageEvent(c, "ending please"));
    const sse = follow(run.body.run_id!);
    while (!heard.includes("ending please")) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 300));
    const cancel = await host.admin("POST", `/v1/runs/${run.body.run_id}/cancel`);
    expect([cancel.status, cancel.body.status]).toEqual([409, "completed"]);
    expect(await facts(run.body.run_id!)).toEqual({ status: "completed", code: null, ends: 1, records: 0 });
    expect((await sse).end).toBe("completed");
  });
});
