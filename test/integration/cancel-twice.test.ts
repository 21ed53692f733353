import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README: cancel answers 202 when it cancels (drops a queued run), 409 once the
 * run has ended. Two cancels of one queued run sent together: only one of them
 * cancels it (and records its end, once), so the other is told it had already ended.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let plain: Runner;
const release = deferred<void>();

beforeAll(async () => {
  plain = await startAdHocRunner({
    name: "plain",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      await release.promise;
      w.reply("done");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: plain.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await plain?.close();
});

describe("cancelling a queued run twice at once", () => {
  it("one cancel answers 202, the other 409", async () => {
    const c = "double-cancel";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c } });
    await host.postEvent(messageEvent(c, "busy"));
    const results: number[][] = [];
    const cancelled: string[] = [];
    for (let i = 0; i < 10; i++) {
      const queued = await host.postEvent(messageEvent(c, `queued ${i}`));
      expect(queued.body.disposition).toBe("queued");
      cancelled.push(queued.body.run_id!);
      const answers = await Promise.all([1, 2].map(() => host.admin("POST", `/v1/runs/${queued.body.run_id}/cancel`)));
      results.push(answers.map((a) => a.status).sort());
    }
    expect(results.filter((r) => r.join() !== "202,409")).toEqual([]);
    // Ended once: one run.failed record and one ledger entry each, however close together the two cancels.
    const records = await host.query<{ run_id: string; n: number }>(
      `SELECT run_id, COUNT(*) AS n FROM event_log WHERE event_type = 'run.failed' AND run_id IN (${cancelled.map(() => "?").join(",")}) GROUP BY run_id`,
      cancelled,
    );
    expect(records.map((r) => Number(r.n))).toEqual(cancelled.map(() => 1));
    const ledger = await host.query<{ n: number }>(`SELECT COUNT(*) AS n FROM run_event WHERE type = 'run.failed' AND run_id IN (${cancelled.map(() => "?").join(",")})`, cancelled);
    expect(Number(ledger[0].n)).toBe(cancelled.length);
  });
});
