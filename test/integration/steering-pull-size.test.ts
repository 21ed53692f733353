import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A steering queue holds up to 100 claimed messages, each with its event (`data` up to MAX_EVENT_BODY_BYTES, 1 MiB):
 * more than one answer can carry across the object's RPC (32 MiB). One `steering.pull` takes what fits its budget
 * and leaves the rest queued, so a runner that pulls until the queue is empty gets every message, each recorded once;
 * and the operator reads such a conversation's EventLog a bounded page at a time.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
const CLAIMED = 40;
const DATA_BYTES = 900 * 1024;
const pulls: { status: number; items: number }[] = [];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "steerer",
    runners: [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      await hold.promise;
      // Pulls until an answer is empty, as a runner at its turn boundary does.
      for (let i = 0; i < CLAIMED; i++) {
        const pulled = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        pulls.push({ status: pulled.status, items: pulled.body.data?.items?.length ?? 0 });
        if (pulled.status !== 200 || pulls.at(-1)!.items === 0) break;
      }
      w.reply("done");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: steerer.url, runnerId: steerer.runnerId(), agentId: "steerer" });
});
afterAll(async () => {
  hold.resolve();
  await host?.dispose();
  await steerer?.close();
});

describe("steering.pull of a queue larger than one RPC answer", () => {
  it("gives the runner every claimed message, or leaves those it could not give in the queue", async () => {
    const conv = "steer-big";
    const first = await host.postEvent(messageEvent(conv, "hold"));
    expect(first.body.disposition).toBe("started");
    for (let i = 0; i < CLAIMED; i++) {
      const ev = await host.postEvent(messageEvent(conv, `follow-up ${i}`, { data: { blob: "x".repeat(DATA_BYTES) } }));
      expect(ev.body.disposition).toBe("steered");
    }
    hold.resolve();
    await host.waitForRun(first.body.run_id!, 60_000);
    const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected' AND run_id = ?", [first.body.run_id!]);
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped' AND run_id = ?", [first.body.run_id!]);
    expect(pulls.every((p) => p.status === 200)).toBe(true);
    // More than one answer, each within its budget; together every message, each recorded injected once, none dropped.
    expect(pulls.filter((p) => p.items > 0).length).toBeGreaterThan(1);
    const got = pulls.reduce((n, p) => n + p.items, 0);
    expect({ runnerGot: got, recordedInjected: Number(injected[0].n), dropped: Number(dropped[0].n) }).toEqual({ runnerGot: CLAIMED, recordedInjected: CLAIMED, dropped: 0 });
  }, 180_000);

  it("and the operator reads that conversation's EventLog a bounded page at a time", async () => {
    // Runs after the test above, which recorded 40 events of ~0.9 MiB. A ledger page stops 1 MiB past its first entry.
    const res = await host.admin("GET", "/v1/conversations/events?conversation_id=steer-big&limit=200");
    const bytes = JSON.stringify(res.body).length;
    expect(bytes).toBeLessThan(4 * 1024 * 1024);
  });
});
