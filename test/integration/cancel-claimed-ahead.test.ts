import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README ("How it runs"): a run of an idle conversation is claimed (marked `running`) as the dispatch stores it, a
 * moment before its alarm starts it; a cancel in that moment still ends it `cancelled`, and the runner never hears of
 * it. That claim is this instance's own: the cancel ends the run it marked, not as a run lost with an earlier instance.
 * The moment is held open: the alarm the dispatch sets first retries a steering drop waiting to be recorded, held.
 */
const CONVERSATION = "claimed-ahead";
const DROP = "steering.dropped";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const heard: string[] = [];
const releaseFirst = deferred();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "claimedahead",
    runners: [{ name: "default", label: { en_US: "claimed ahead" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      heard.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "hold") await releaseFirst.promise;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
  // A drop not recorded waits this long for its retry: the idle moment the test dispatches in.
  host = await startTestHost({ vars: { DB_RETRY_PAUSE_MS: "5000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  const agent = { agent_id: "claimed-ahead", name: "claimed ahead", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: CONVERSATION } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  releaseFirst.resolve();
  await host?.dispose();
  await runner?.close();
});

/** Holds the Worker's next database request carrying `matching` until the answer's `release`; `held` settles once it is. */
function holdNext(matching: string) {
  const [held, release] = [deferred(), deferred()];
  host.databaseOutage({ holdUntil: release.promise, matching, onHeld: () => held.resolve() });
  return { held: held.promise, release: release.resolve };
}

async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("a run claimed as it is dispatched, cancelled before its alarm starts it", () => {
  it("answers 202 and ends cancelled; its runner never hears of it", async () => {
    const first = await host.postEvent(messageEvent(CONVERSATION, "hold"));
    await until("the first run at its runner", () => heard.includes("hold"));
    expect((await host.postEvent(messageEvent(CONVERSATION, "claimed"))).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });

    // The first run ends without pulling its claim: its drop's record fails, and so does every retry of it until let through.
    host.databaseOutage({ queries: 1_000, matching: DROP });
    releaseFirst.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    // The retries its end prompted are over; the next waits DB_RETRY_PAUSE_MS. The next alarm's retry is held, before it starts anything.
    await new Promise((r) => setTimeout(r, 500));
    const next = holdNext(DROP);
    try {
      const target = await host.postEvent(messageEvent(CONVERSATION, "cancel me"));
      expect(target.body.disposition).toBe("started");
      await next.held;
      await until("its claim made as it was dispatched", async () => (await host.query<{ status: string }>("SELECT status FROM run WHERE run_id = ?", [target.body.run_id]))[0]?.status === "running");

      const cancel = await host.admin("POST", `/v1/runs/${target.body.run_id}/cancel`);
      expect({ status: cancel.status, body: cancel.body }).toEqual({ status: 202, body: { run_id: target.body.run_id, cancelled: true, status: "cancelled" } });
      expect(await host.waitForRun(target.body.run_id!)).toMatchObject({ status: "cancelled", error: { code: "cancelled" } });
      host.databaseOutage({ queries: 0, matching: DROP });
      next.release();
      // The claimed message, its drop recorded now, is answered in a run of its own; the cancelled one never is.
      await until("the claimed message answered", () => heard.includes("claimed"));
      expect(heard).toEqual(["hold", "claimed"]);
    } finally {
      host.databaseOutage({ queries: 0, matching: DROP });
      next.release();
    }
  });
});
