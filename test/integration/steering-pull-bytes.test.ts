import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred, rawHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { waitFor } from "../support/fake-platform";

/** README: "a steering.pull answer at most 4 MiB of JSON past its first item, the rest left queued for the next pull". */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const hold = deferred<void>();
let started = false;
const answers: { status: number; items: number; bytesPastFirst: number }[] = [];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "bytes",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      started = true;
      await hold.promise;
      const answer = await rawHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      const items = ((await answer.json()) as any).data?.items ?? [];
      const bytesPastFirst = items.slice(1).reduce((n: number, i: unknown) => n + Buffer.byteLength(JSON.stringify(i)), 0);
      answers.push({ status: answer.status, items: items.length, bytesPastFirst });
      w.reply("done");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: steerer.url, runnerId: steerer.runnerId(), agentId: "bytes" });
});
afterAll(async () => {
  hold.resolve();
  await host?.dispose();
  await steerer?.close();
});

describe("steering.pull byte bound", () => {
  it("answers at most 4 MiB of JSON past its first item, also for text outside ASCII", async () => {
    const c = "rv-pull-bytes";
    const first = await host.postEvent(messageEvent(c, "start"));
    await waitFor(() => started, 10_000, "the run to start");
    // Six messages whose data carries 330 000 CJK characters each: about 990 KB of UTF-8 apiece, under the 1 MiB event body cap.
    const text = "漢".repeat(330_000);
    for (let i = 0; i < 6; i++) { const r = await host.postEvent(messageEvent(c, `m${i}`, { data: { blob: text } })); expect(r.body.disposition, JSON.stringify(r.body).slice(0, 300)).toBe("steered"); }
    hold.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    expect(answers[0].status).toBe(200);
    expect(answers[0].bytesPastFirst).toBeLessThanOrEqual(4 * 1024 * 1024);
    // The rest stayed queued: this run pulls once, so it ends with them recorded as dropped, none lost.
    expect(answers[0].items).toBeLessThan(6);
    const dropped = await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'steering.dropped'", [first.body.run_id!]);
    expect(dropped).toHaveLength(6 - answers[0].items);
  }, 60_000);
});
