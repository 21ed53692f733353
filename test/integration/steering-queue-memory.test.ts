import { readFileSync, readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A busy run's steering queue filled with large API events (~1 MiB each, under MAX_EVENT_BODY_BYTES). Each claim
 * counts the queue and each pull chooses its answer from it: neither may bring every queued message into the
 * Durable Object's memory (a Worker isolate has 128 MB). Measured as the peak RSS of this host's workerd process.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
const CLAIMED = 80;
const pulled: string[] = [];

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
    runners: [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      await hold.promise;
      for (;;) {
        const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        const items = r.body.data?.items ?? [];
        if (r.status !== 200 || !items.length) break;
        pulled.push(...items.map((i: any) => i.input.text));
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

describe("a steering queue of many large messages", () => {
  it("costs the conversation's object memory bounded by what one claim or pull carries, and every message is pulled once, in order", async () => {
    const conv = "steer-memory";
    const first = await host.postEvent(messageEvent(conv, "hold"));
    expect(first.body.disposition).toBe("started");
    const before = workerdPeakMiB();
    for (let i = 0; i < CLAIMED; i++) {
      const ev = await host.postEvent(messageEvent(conv, `m${i}`, { data: { blob: "x".repeat(1000 * 1024) } }));
      expect(ev.body.disposition).toBe("steered");
    }
    hold.resolve();
    await host.waitForRun(first.body.run_id!, 60_000);
    const after = workerdPeakMiB();
    expect(pulled).toEqual(Array.from({ length: CLAIMED }, (_, i) => `m${i}`));
    // About 80 MiB is claimed in all; before, each claim read the whole queue (over 1.5 GiB at the peak).
    if (before !== null && after !== null) expect(after - before).toBeLessThan(600);
  }, 120_000);
});
