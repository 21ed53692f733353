import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCall } from "../../local/setup";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { startHoldingRunner, useDataDir } from "../support/restart-host";

/**
 * README: `reject` rejects "only while a run that takes turns is active or waiting". A run lost with an earlier
 * instance of its conversation's object (the local host restarted mid-run) is neither: nothing runs it any more, and
 * it ends `host.session_lost` once the watchdog looks. A message arriving meanwhile must not be rejected for it.
 */
const dataDir = useDataDir("agent-host-reject-restart-");
let runner: Awaited<ReturnType<typeof startHoldingRunner>>;
const never = deferred();
const started: string[] = [];

// A watchdog far away: the restarted object has not looked at its lost run yet when the next message comes.
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "60000" });

beforeAll(async () => {
  runner = await startHoldingRunner("rvrejectrestart", never.promise, started);
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
});

describe("reject after a restart", () => {
  it("a message is not rejected because of a run lost with the previous instance", async () => {
    let host = await start();
    try {
      expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
      const agent = { agent_id: "reject-restart", name: "reject-restart", runner_id: runner.runnerId(), event_types: ["message.received"], concurrency: { strategy: "reject" } };
      expect((await adminCall(host, "POST", "/v1/admin/agents", agent)).status).toBe(201);
      const held = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("reject-restart", "hold please"));
      expect(held.body.disposition).toBe("started");
      const until = Date.now() + 10_000;
      while (!started.includes("hold please") && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
      await host.dispose();
      host = await start();

      // The run it would be rejected for is gone (its runner's call died with the old instance), not yet ended.
      expect((await adminCall<{ status: string }>(host, "GET", `/v1/runs/${held.body.run_id}`)).body.status).toBe("running");
      const next = await adminCall<{ run_id: string | null; disposition: string }>(host, "POST", "/v1/events", messageEvent("reject-restart", "hello again"));
      expect(next.body.disposition).toBe("started");
      expect((await waitForRunOn(host, held.body.run_id, 20_000)).error?.code).toBe("host.session_lost");
      expect((await waitForRunOn(host, next.body.run_id!, 20_000)).status).toBe("completed");
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
