import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCall, bindRunner } from "../../local/setup";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useDataDir } from "../support/restart-host";

/**
 * README (runner results): past a run's first 100 drops, one `runner.result_dropped` record counts the rest. A run
 * lost with its instance (a restart: ended `host.session_lost` by the next one) has its count too, taken from the
 * warnings its ledger holds, as a run the host ended after its own final write failed does.
 */
const dataDir = useDataDir("agent-host-restart-drops-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const never = deferred();
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "restartdrops",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      // A scope no run has: each one is dropped as an invalid strict payload; then the runner works on, until the restart.
      for (let i = 0; i < 150; i++) w.send("state.updated", { scope: "galaxy", key: `k${i}`, value: i });
      return never.promise;
    },
  });
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
});

describe("a run lost with a restart after 150 of its results were dropped", () => {
  it("has its first 100 drops audited and one record counting the other 50", async () => {
    let host = await start();
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartdrops" });
      const runId = (await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("rd-lost", "go"))).body.run_id;
      const until = Date.now() + 10_000;
      while ((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId])).length < 150) {
        if (Date.now() > until) throw new Error("the drops were never recorded");
        await new Promise((r) => setTimeout(r, 20));
      }
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const audits = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ? ORDER BY seq", [runId])).map((r) => JSON.parse(r.data_json));
      expect(audits.filter((a) => a.ledger_seq !== null)).toHaveLength(100);
      expect(audits.filter((a) => a.ledger_seq === null)).toEqual([
        expect.objectContaining({ run_id: runId, runner_id: runner.runnerId(), result_type: null, suppressed: 50, reason: expect.stringMatching(/^50 more dropped results of this run were not recorded/) }),
      ]);
    } finally {
      await host.dispose();
    }
  }, 40_000);
});
