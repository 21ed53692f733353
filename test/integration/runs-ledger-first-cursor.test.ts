import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * README, GET /v1/runs/{run_id}/events: "`next_cursor` is always the position
 * after the page", so a client can follow a live run from its first page,
 * even when nothing is recorded yet (a queued run).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "firstcursor" });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "firstcursor", runner_id: runner.runnerId(), concurrency: { strategy: "enqueue" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("GET /v1/runs/{run_id}/events of a run with no entry yet", () => {
  it("still answers the position after the (empty) page", async () => {
    const hold = deferred();
    const started = deferred();
    const busy = runner.run(host, "first-cursor", async () => {
      started.resolve();
      await hold.promise;
      return "done";
    });
    await started.promise;
    const waiting = await host.postEvent(messageEvent("first-cursor", "waits its turn"));
    expect(waiting.body.disposition).toBe("queued");
    const page = (await host.admin("GET", `/v1/runs/${waiting.body.run_id}/events`)).body;
    hold.resolve();
    await busy;
    expect(page).toMatchObject({ items: [], run_status: "created" });
    expect(page.next_cursor).toEqual(expect.any(String));
    // Followed from there, the page holds the whole ledger once the run has ended.
    await host.waitForRun(waiting.body.run_id!);
    const next = (await host.admin("GET", `/v1/runs/${waiting.body.run_id}/events?cursor=${page.next_cursor}`)).body;
    expect(next.items.map((e: { type: string }) => e.type).at(-1)).toBe("run.completed");
    expect(next.items[0].seq).toBe(1);
  });
});
