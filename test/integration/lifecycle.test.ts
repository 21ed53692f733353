import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminCall, bindRunner } from "../../local/setup";
import { messageEvent, startHostOn, waitForRunOn } from "../support/host";
import { callHostApi, deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §11: a run is bound to the instance that owns its session. Restart
 * the local host mid-run (same data folder, so Durable Object storage and its
 * alarms survive, the in-memory session does not): the run ends failed with
 * host.session_lost and its token stops working.
 */
let dataDir: string;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred();
const startedRuns: { runId: string; token: string; baseUrl: string; text: string }[] = [];

// The default deadline (5 minutes): the orphan must be found by the watchdog's heartbeat, long before it.
const start = () =>
  startHostOn(dataDir, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-restart-"));
  runner = await startAdHocRunner({
    name: "restartable",
    async onRun({ body }, res) {
      const ctx = body.context;
      startedRuns.push({ runId: ctx.run_id, token: ctx.runtime.api.token, baseUrl: ctx.runtime.api.base_url, text: ctx.input.text });
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text.startsWith("hold")) await release.promise;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
});
afterAll(async () => {
  release.resolve();
  await runner?.close();
  rmSync(dataDir, { recursive: true, force: true });
});


async function untilStarted(n: number) {
  const end = Date.now() + 10_000;
  while (startedRuns.length < n) {
    if (Date.now() > end) throw new Error("runner was never called");
    await new Promise((r) => setTimeout(r, 10));
  }
  return startedRuns[n - 1];
}

describe("a host restarted mid-run", () => {
  it("ends the run as host.session_lost from its alarm with nothing else happening, refuses its token, and the conversation goes on", async () => {
    let host = await start();
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartable" });
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("restart", "hold on"));
      const live = await untilStarted(1);
      expect(live.runId).toBe(held.body.run_id);
      expect((await callHostApi(host.url, live.runId, live.token, "host.version")).status).toBe(200);
      // A message of the conversation waits its turn behind the held run.
      const queued = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("restart", "queued behind"));
      expect(queued.body.disposition).toBe("queued");

      await host.dispose();
      host = await start();

      // The session died with the old instance: its token is refused at once.
      const afterRestart = await callHostApi(host.url, live.runId, live.token, "host.version");
      expect(afterRestart.status).toBe(401);
      expect(afterRestart.body.error?.code).toBe("unauthorized");

      // Nothing else happens in the conversation: the persisted alarm (the watchdog's heartbeat) finds the orphan, and
      // the message queued behind it runs.
      const lost = await waitForRunOn(host, live.runId, 15_000);
      expect(lost).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      // The host's loss, not the event's: sent again, it may well run.
      const ledger = (await adminCall<{ items: { type: string; data: { retryable: boolean } }[] }>(host, "GET", `/v1/runs/${live.runId}/events`)).body.items;
      expect(ledger.filter((entry) => entry.type === "run.failed").map((entry) => entry.data.retryable)).toEqual([true]);
      expect(await waitForRunOn(host, queued.body.run_id, 10_000)).toMatchObject({ status: "completed", message: { content: "done: queued behind" } });

      const next = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent("restart", "after"));
      expect(next.body.disposition).toBe("started");
      expect(await waitForRunOn(host, next.body.run_id, 10_000)).toMatchObject({ status: "completed", message: { content: "done: after" } });
      expect(startedRuns.map((r) => r.text)).toEqual(["hold on", "queued behind", "after"]);
    } finally {
      await host.dispose();
    }
  });
});

describe("an operator's cancel of a run lost with a restart", () => {
  it("ends it as lost (it did start), not as cancelled before it started, and answers that it had ended", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-host-restart-cancel-"));
    // A watchdog far off: the cancel is what finds the orphan.
    const startSlow = () => startHostOn(dir, { RUN_WATCHDOG_INTERVAL_MS: "60000" });
    let host = await startSlow();
    try {
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "restartable" });
      const before = startedRuns.length;
      const held = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("restart-cancel", "hold still"));
      await untilStarted(before + 1);
      await host.dispose();
      host = await startSlow();
      const cancel = await adminCall<{ cancelled: boolean; status: string }>(host, "POST", `/v1/runs/${held.body.run_id}/cancel`);
      expect([cancel.status, cancel.body.cancelled, cancel.body.status]).toEqual([409, false, "failed"]);
      expect(await waitForRunOn(host, held.body.run_id, 5_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
    } finally {
      await host.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
