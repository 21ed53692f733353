import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { deferred } from "../support/host-api";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { startHoldingRunner, useDataDir } from "../support/restart-host";

/**
 * A run claimed in libSQL (`running`) by an instance that died before its own table said so (run-one.ts marks it
 * `running` there just after the claim's answer) is left `queued` in that table. README: a cancel of a run lost with
 * an earlier instance is not cancelled; it ends `host.session_lost` (409), as the run's next start would end it. The
 * cancel comes before that start: the next instance's watchdog is held ending another run lost ahead of it.
 */
const dataDir = useDataDir("agent-host-claimed-unmarked-");
const never = deferred();
const started: string[] = [];
let runner: Awaited<ReturnType<typeof startHoldingRunner>>;
let output = "";
const start = (more: Parameters<typeof startHostOn>[2] = {}) => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" }, { onRuntimeOutput: (text) => (output += text), ...more });
const post = (host: LocalHost, text: string) => adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("claimed-unmarked", text));
const rowOf = async (host: LocalHost, runId: string) => (await host.query<{ status: string }>("SELECT status FROM run WHERE run_id = ?", [runId]))[0]?.status;
const endLines = (runId: string) => output.split("\n").filter((l) => l.startsWith('{"log":"run.ended"') && l.includes(runId)).map((l) => JSON.parse(l) as { status: string; error_code: string });

async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

beforeAll(async () => void (runner = await startHoldingRunner("claimedunmarked", never.promise, started)));
afterAll(async () => {
  never.resolve();
  await runner?.close();
});

describe("a cancel of a run claimed by an instance that died before its table marked it running", () => {
  it("answers 409 and the run ends host.session_lost once, not `cancelled before it started`", async () => {
    let host = await start();
    let releaseAhead = () => {};
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "claimedunmarked" });
      // Parallel: the second run starts beside the first, which is lost with the instance too and is ended first after the restart.
      const agent = (await adminCall<Record<string, unknown>>(host, "GET", "/v1/admin/agents/claimedunmarked")).body;
      expect((await adminCall(host, "PUT", "/v1/admin/agents/claimedunmarked", { ...agent, concurrency: { strategy: "parallel" } })).status).toBe(200);
      const ahead = await post(host, "hold ahead");
      await until("the run ahead at its runner", () => started.includes("hold ahead"));
      // The second run's claim is applied, its answer late: the instance dies in that window.
      host.databaseOutage({ answerDelayMs: 10_000, matching: 'started_at\\" = ?', queries: 1 });
      const target = await post(host, "hold target");
      expect(target.body.disposition).toBe("started");
      await until("the claim applied", async () => (await rowOf(host, target.body.run_id)) === "running");
      await host.dispose();

      // The next instance's watchdog ends the run ahead first (it was marked running): held there, the target waits.
      const held = deferred();
      const release = deferred();
      releaseAhead = () => release.resolve();
      host = await start({ outage: { holdUntil: release.promise, matching: ahead.body.run_id, onHeld: () => held.resolve() } });
      await held.promise;
      expect((await adminCall<{ status: string }>(host, "GET", `/v1/runs/${target.body.run_id}`)).body.status).toBe("running");

      const cancel = await adminCall<{ cancelled: boolean; status: string; error: { code: string } }>(host, "POST", `/v1/runs/${target.body.run_id}/cancel`);
      expect({ status: cancel.status, cancelled: cancel.body.cancelled, run: cancel.body.status, code: cancel.body.error?.code }).toEqual({ status: 409, cancelled: false, run: "failed", code: "conflict" });
      releaseAhead();
      expect(await waitForRunOn(host, target.body.run_id)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      expect(await waitForRunOn(host, ahead.body.run_id)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      const ledger = (await adminCall<{ items: { type: string; data: { code: string } }[] }>(host, "GET", `/v1/runs/${target.body.run_id}/events`)).body.items;
      expect(ledger.map((e) => [e.type, e.data.code])).toEqual([["run.failed", "host.session_lost"]]);
      await until("its end's log line", () => endLines(target.body.run_id).length > 0);
      expect(endLines(target.body.run_id).map((l) => [l.status, l.error_code])).toEqual([["failed", "host.session_lost"]]);
      expect(started).not.toContain("hold target");
    } finally {
      releaseAhead();
      await host.dispose();
    }
  });
});
