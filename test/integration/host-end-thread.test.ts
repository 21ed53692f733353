import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A conversation's EventLog, read by thread (GET /v1/conversations/events?thread_id=),
 * names each record's thread, the `run.failed` the host writes when it ends a
 * run itself (a queued run cancelled, a host failure, a lost run;
 * src/run/host-end.ts) included, as the runner-ended one does.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "threads" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "threads", runner_id: runner.runnerId(), concurrency: { strategy: "enqueue" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("the run.failed record of a run the host ended, read by thread", () => {
  it("names the thread, as the records around it do", async () => {
    const where = { thread_id: "t-1" };
    const hold = deferred();
    const started = deferred();
    const busy = runner.run(host, "thread-end", async () => {
      started.resolve();
      await hold.promise;
      return "done";
    }, where);
    await started.promise;
    const waiting = await host.postEvent(messageEvent("thread-end", "never runs", where));
    expect(waiting.body.disposition).toBe("queued");
    expect((await host.admin("POST", `/v1/runs/${waiting.body.run_id}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(waiting.body.run_id!)).status).toBe("cancelled");
    hold.resolve();
    await busy;

    const items = (await host.admin("GET", "/v1/conversations/events?conversation_id=thread-end&thread_id=t-1")).body.items as any[];
    const failed = items.find((e) => e.event_type === "run.failed" && e.run_id === waiting.body.run_id);
    expect(failed).toBeDefined();
    expect(items.filter((e) => e.event_type === "message.received").map((e) => e.thread_id)).toEqual(["t-1", "t-1"]);
    expect(failed.thread_id).toBe("t-1");
  });
});
