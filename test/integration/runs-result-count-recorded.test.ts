import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { runLedger } from "../support/scripted-runner";

/**
 * A run's `result_count` (GET /v1/runs/{id}) is the number of its runner's results its ledger records. It used to be
 * the number the run read, so a batch the database refused (given up after its retries) or one whose reference check
 * it refused counted results GET /v1/runs/{id}/events never shows.
 */
const REFUSED = "result-count-refused-batch";
const UNCHECKED = "art_result_count_unchecked";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "result-count",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text);
      if (mode === "plain") return w.reply("ok");
      // The first read is written at once; what follows is held into one batch, written when it falls due or with the end.
      w.send("message.delta", { chunk: { role: "assistant", content: "working" } });
      await waitFor(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ?", [ctx.run_id])).length > 0, 10_000, "the first read written");
      if (mode === "refused") {
        w.send("message.completed", { message: { role: "assistant", content: REFUSED } });
        w.send("message.delta", { chunk: { role: "assistant", content: "more" } });
        w.send("message.delta", { chunk: { role: "assistant", content: "and more" } });
        // The batch falls due while the runner is still at work: its write fails the run.
        return void (await hold.promise);
      }
      w.send("artifact.created", { artifact_id: UNCHECKED, artifact_type: "file" });
      w.reply("done");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "result-count" });
});
afterAll(async () => {
  hold.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

async function runOf(text: string) {
  const posted = await host.postEvent(messageEvent(`result-count-${text}`, text));
  expect(posted.status).toBe(202);
  const run = await host.waitForRun(posted.body.run_id!, 20_000);
  const recorded = (await runLedger(host, run.run_id)).filter((e) => e.origin === "runner");
  return { run, recorded };
}

describe("a run's result_count", () => {
  // The end's write counts the rows it writes before it (its terminal batch's): a count taken ahead of them would be 0.
  it("counts the results of a completed run", async () => {
    const { run, recorded } = await runOf("plain");
    expect(run.status).toBe("completed");
    expect(recorded.map((e) => e.type)).toEqual(["message.completed", "run.completed"]);
    expect(run.result_count).toBe(2);
  });

  it("leaves out a batch the database refused until the host gave up on it", async () => {
    // Its write and the three tries again (QUICK_DB_RETRIES): the run fails, the batch never written.
    host.databaseOutage({ queries: 4, matching: REFUSED });
    const { run, recorded } = await runOf("refused");
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    expect(recorded.map((e) => e.type)).toEqual(["message.delta"]);
    expect(run.result_count).toBe(1);
  });

  it("leaves out the last batch when the database refused the read that checks its reference", async () => {
    host.databaseOutage({ queries: 1, matching: UNCHECKED });
    const { run, recorded } = await runOf("unchecked");
    expect({ status: run.status, code: run.error?.code }).toEqual({ status: "failed", code: "host.internal_error" });
    expect(recorded.map((e) => e.type)).toEqual(["message.delta"]);
    expect(run.result_count).toBe(1);
  });
});
