/**
 * README: "started" means the run starts now; for `interrupt`, the active run ends cancelled, then the new one
 * starts. A run answered "started" whose alarm had not started it yet was neither interrupted nor run first: the
 * newer event overtook it and the older message was answered after it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

let host: TestHost;
let plain: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const order = new Map<string, string[]>();

beforeAll(async () => {
  plain = await startAdHocRunner({
    name: "plainrv",
    async onRun({ body }, res) {
      const ctx = body.context;
      const c = ctx.conversation.conversation_id as string;
      order.set(c, [...(order.get(c) ?? []), ctx.input.text ?? ""]);
      const w = resultWriter(res, ctx.run_id);
      if ((ctx.input.text ?? "").startsWith("hold")) await release.promise;
      try {
        w.reply(ctx.input.text ?? "");
      } catch {
        /* cancelled */
      }
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: plain.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await plain?.close();
});

const statusOf = async (id: string) => (await host.admin("GET", `/v1/runs/${id}`)).body.status as string;

describe("interrupt racing a run answered started that its alarm has not started yet", () => {
  it("the run answered started is interrupted (cancelled) or runs first; it is never overtaken and run after the newer event", async () => {
    const bad: string[] = [];
    for (let i = 0; i < 12; i++) {
      const c = `rv-int-race-${i}`;
      await putAgent(host, { agent_id: `q-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
      await putAgent(host, { agent_id: `i-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, event_types: ["api.invoked"], concurrency: { strategy: "interrupt" } });
      const a = host.postEvent(messageEvent(c, "hold older"));
      await new Promise((r) => setTimeout(r, i % 4));
      const b = await host.postEvent({ ...messageEvent(c, "newer"), event_type: "api.invoked" });
      const older = await a;
      await new Promise((r) => setTimeout(r, 300));
      if (older.body.disposition === "started" && b.body.disposition === "started") {
        const sOlder = await statusOf(older.body.run_id!);
        const sNewer = await statusOf(b.body.run_id!);
        const started = order.get(c) ?? [];
        // The newer one ran while the older one, answered started, was neither cancelled nor started.
        if (started[0] === "newer" && sOlder !== "cancelled") bad.push(`${c}: older ${sOlder} newer ${sNewer}, runner saw ${JSON.stringify(started)}`);
      }
    }
    expect(bad).toEqual([]);
  }, 60_000);
});
