import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A run already stopped by its deadline (RUN_DEADLINE_MS) is still in `active` until its end is recorded;
 * ConversationDO.cancel aborts it again (a no-op on an aborted signal) and answers `cancelled: true`: the
 * operator gets 202 "cancelling" for a run that then ends `timeout`.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
const DELTA = "probe-delta-written-across-the-deadline";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "deadline",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      await new Promise((r) => setTimeout(r, 1_000));
      w.send("message.delta", { chunk: { role: "assistant", content: DELTA } });
      await hold.promise;
      w.reply("late");
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  hold.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("cancel of a run its deadline already stopped", () => {
  it("is answered with how the run ended (409 timeout), not 202 cancelling", async () => {
    const c = "probe-cancel-after-deadline";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    // The delta's write (one round trip) is slow: it is still in flight when the deadline passes.
    host.databaseOutage({ delayMs: 2_000, matching: DELTA });
    const posted = await host.postEvent(messageEvent(c, "go"));
    await new Promise((r) => setTimeout(r, 2_500));
    const cancel = await host.admin("POST", `/v1/runs/${posted.body.run_id}/cancel`);
    const run = await host.waitForRun(posted.body.run_id!);
    const seen = { cancel: cancel.status, status: run.status };
    expect(seen).toEqual(cancel.status === 202 ? { cancel: 202, status: "cancelled" } : { cancel: 409, status: "timeout" });
  });
});
