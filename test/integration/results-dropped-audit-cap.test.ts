import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { runLedger } from "../support/scripted-runner";

/**
 * A runner that sends invalid results in a loop. Each is dropped and warned about in the run's own ledger, but the
 * `runner.result_dropped` audit goes to the conversation's EventLog, which every runner of the conversation pages
 * (`event.page`) and the operator reads: only a run's first 100 are recorded there, as for its Host API denials, then
 * one record with the count of the rest. Before the cap, a run wrote one per line up to its stream limit (hundreds of
 * thousands in 32 MiB).
 */
const SENT = 150;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "drop-flood",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      // A scope no run has: each one is dropped as an invalid strict payload.
      for (let i = 0; i < SENT; i++) w.send("state.updated", { scope: "galaxy", key: `k${i}`, value: i });
      w.reply("done despite the noise");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "drop-flood" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a runner whose results are dropped in a loop", () => {
  it("has its first 100 drops audited in EventLog, then one record of how many more were not; its ledger warns of each", async () => {
    const posted = await host.postEvent(messageEvent("drop-flood", "go"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.message?.content]).toEqual(["completed", "done despite the noise"]);

    const ledger = await runLedger(host, run.run_id);
    const dropped = ledger.filter((e: any) => e.origin === "runner" && e.type === "state.updated");
    const warnings = ledger.filter((e) => e.type === "host.warning" && e.data.code === "result.invalid_payload");
    expect([dropped.length, warnings.length]).toEqual([SENT, SENT]);

    const audits = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ? ORDER BY seq", [run.run_id])).map((r) => JSON.parse(r.data_json));
    const named = audits.filter((a) => a.ledger_seq !== null);
    // The first 100 drops, each named by its ledger entry, as before.
    expect(named.map((a) => a.ledger_seq)).toEqual(dropped.slice(0, 100).map((e: any) => e.seq));
    for (const a of named) expect(a).toMatchObject({ run_id: run.run_id, result_type: "state.updated" });
    // And one that counts the rest.
    expect(audits.filter((a) => a.ledger_seq === null)).toEqual([
      expect.objectContaining({ run_id: run.run_id, runner_id: runner.runnerId(), result_type: null, suppressed: SENT - 100, reason: expect.stringMatching(/^50 more dropped results of this run were not recorded/) }),
    ]);
  });
});
