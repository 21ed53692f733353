import { readFileSync, readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A steering queue holds up to 100 claimed messages, each with its event (`data` up to MAX_EVENT_BODY_BYTES, 1 MiB):
 * more than one answer can carry across the object's RPC (32 MiB). One `steering.pull` takes what fits its budget
 * and leaves the rest queued, so a runner that pulls until the queue is empty gets every message, each recorded once;
 * and the operator reads such a conversation's EventLog a bounded page at a time. Counting the queue (each claim),
 * choosing a pull's answer and dropping never read every queued message into the object's memory (an isolate has
 * 128 MB): measured as the peak RSS of this host's workerd process.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
const CLAIMED = 80;
const DATA_BYTES = 1000 * 1024;
const pulls: { status: number; items: number }[] = [];
const pulledTexts: string[] = [];

/** Peak resident memory (MiB) of the workerd process this test started, or null off Linux. */
function workerdPeakMiB(): number | null {
  try {
    const children = new Map<number, number[]>();
    for (const d of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
      try {
        const ppid = Number(readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1].split(" ")[1]);
        children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
      } catch {}
    }
    const todo = [process.pid];
    while (todo.length) {
      const p = todo.pop()!;
      for (const c of children.get(p) ?? []) {
        todo.push(c);
        if (readFileSync(`/proc/${c}/comm`, "utf8").trim() === "workerd") return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${c}/status`, "utf8"))![1]) / 1024;
      }
    }
  } catch {}
  return null;
}


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
        pulledTexts.push(...(pulled.body.data?.items ?? []).map((i: any) => i.input.text));
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
    const before = workerdPeakMiB();
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
    expect(pulledTexts).toEqual(Array.from({ length: CLAIMED }, (_, i) => `follow-up ${i}`));
    // About 80 MiB is claimed in all; when each claim read the whole queue, the peak grew by over 1.5 GiB.
    const after = workerdPeakMiB();
    if (before !== null && after !== null) expect(after - before).toBeLessThan(600);

    // The operator reads that conversation's EventLog (80 events of ~1 MiB) a bounded page at a time.
    const res = await host.admin("GET", "/v1/conversations/events?conversation_id=steer-big&limit=200");
    const bytes = JSON.stringify(res.body).length;
    expect(bytes).toBeLessThan(4 * 1024 * 1024);
  }, 180_000);
});
