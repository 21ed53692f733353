/**
 * README (runner results): past a run's first 100 drops one record counts those without an audit of their own, drops
 * in a batch of results never written included. A batch naming an artifact by id is checked against the store before
 * it is written; when the database refuses that read, nothing of the batch is written (its drops' audits neither),
 * and the run's end must still count them rather than leave no trace of them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
// Only the check of the batch's reference names these ids (its ledger entry, written after, is never tried).
const REFERENCED = { midway: "art_probe_unchecked_midway", last: "art_probe_unchecked_last" };

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "unchecked-drops",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const midway = ctx.input.text === "midway";
      // Its first read is written at once; what follows within the write interval is held into one batch.
      w.send("message.delta", { chunk: { role: "assistant", content: "working" } });
      await new Promise((r) => setTimeout(r, 50));
      w.send("artifact.created", { artifact_id: midway ? REFERENCED.midway : REFERENCED.last, artifact_type: "file" });
      // A scope no run has: each one is dropped as an invalid strict payload, and audited (the run's first drops).
      for (let i = 0; i < 30; i++) w.send("state.updated", { scope: "galaxy", key: `k${i}`, value: i });
      // Midway: the batch falls due and is written while the runner is still at work; last: it is written with the end.
      if (midway) await hold.promise;
      w.send("message.completed", { message: { role: "assistant", content: "done" } });
      w.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "unchecked-drops", runner_id: runner.runnerId() });
});
afterAll(async () => {
  hold.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const audits = async (runId: string) =>
  (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ? ORDER BY seq", [runId])).map((r) => JSON.parse(r.data_json));

describe("drops in a batch whose reference check the database refused", () => {
  for (const when of ["midway", "last"] as const) {
    it(`are counted by the run's end (the batch written ${when === "midway" ? "while the run goes on" : "with the run's end"})`, async () => {
      // The one read that checks the batch's reference refused: the batch is never written, the run fails.
      host.databaseOutage({ queries: 1, matching: REFERENCED[when] });
      const runId = (await host.postEvent(messageEvent(`unchecked-${when}`, when))).body.run_id!;
      const run = await host.waitForRun(runId, 20_000);
      expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
      expect(await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId])).toEqual([]);
      // None of the 30 has a record of its own: the count says so, rather than nothing.
      expect(await audits(runId)).toEqual([expect.objectContaining({ run_id: runId, result_type: null, ledger_seq: null, suppressed: 30 })]);
    }, 30_000);
  }
});
