/**
 * README (runner results): only a run's first 100 drops get a `runner.result_dropped` audit record each, and one more
 * record with the run's end counts the rest (`suppressed`). That count must not be lost, nor come out short, when a
 * write of the run fails: its end written by the host itself (`host.internal_error`, its own final write refused), or
 * a batch holding audits refused (those drops then have no record of their own either).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = new Map([["flood", deferred<void>()], ["few", deferred<void>()]]);
const END_MARK = "probe-drop-count-end-marker";
const BATCH_MARK = "probe-drop-count-batch-marker";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "drop-count",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const few = ctx.input.text === "few";
      if (few) {
        // Its first read is written at once; the drops, sent within the write interval after it, are held into one batch.
        w.send("message.delta", { chunk: { role: "assistant", content: "working" } });
        await new Promise((r) => setTimeout(r, 50));
      }
      // A scope no run has: each one is dropped as an invalid strict payload.
      for (let i = 0; i < (few ? 30 : 150); i++) w.send("state.updated", { scope: "galaxy", key: `${few ? BATCH_MARK : "k"}${i}`, value: i });
      await holds.get(ctx.input.text)?.promise;
      w.send("message.completed", { message: { role: "assistant", content: "done" } });
      w.send("run.completed", { finish_reason: END_MARK });
      res.end();
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "drop-count", runner_id: runner.runnerId() });
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const audits = async (runId: string) =>
  (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ? ORDER BY seq", [runId])).map((r) => JSON.parse(r.data_json));

describe("the count of a run's drops without an audit record", () => {
  it("is written when the host ends the run itself, its own final write refused", async () => {
    const runId = (await host.postEvent(messageEvent("drop-count-end", "flood"))).body.run_id!;
    // Every drop recorded (each with its warning) before the end.
    await expect
      .poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId])).length, { timeout: 10_000 })
      .toBe(150);
    // Every try of the final write (one, and three more after pauses) refused: the host ends the run itself.
    host.databaseOutage({ queries: 4, matching: END_MARK });
    holds.get("flood")!.resolve();
    const run = await host.waitForRun(runId, 20_000);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    const all = await audits(runId);
    expect(all.filter((a) => a.ledger_seq !== null)).toHaveLength(100);
    expect(all.filter((a) => a.ledger_seq === null)).toEqual([
      expect.objectContaining({ run_id: runId, runner_id: runner.runnerId(), result_type: null, suppressed: 50, reason: expect.stringMatching(/^50 more dropped results of this run were not recorded/) }),
    ]);
  }, 30_000);

  it("counts the drops whose audits were in a batch the database refused", async () => {
    const runId = (await host.postEvent(messageEvent("drop-count-batch", "few"))).body.run_id!;
    // The batch of the 30 drops (their ledger entries name the marker) refused on every try: the run fails.
    host.databaseOutage({ queries: 4, matching: BATCH_MARK });
    const run = await host.waitForRun(runId, 20_000);
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    expect(await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId])).toEqual([]);
    // None of the 30 has a record of its own: the count says so, rather than nothing.
    expect(await audits(runId)).toEqual([
      expect.objectContaining({ run_id: runId, result_type: null, ledger_seq: null, suppressed: 30, reason: expect.stringMatching(/^30 dropped results of this run were not recorded.*the write of 30 of those was refused or never applied/) }),
    ]);
  }, 30_000);
});
