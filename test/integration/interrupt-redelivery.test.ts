import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * Interrupt: the newest message's run survives. A redelivery of an older,
 * already superseded message answers `duplicate` and must change nothing: in
 * particular it must not interrupt the newer run. A run answered "started" that
 * its alarm had not started yet is interrupted too (its own agent's), or (another agent's, which an interrupt does not
 * supersede) runs first: it is never overtaken.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let plain: Runner;
const release = deferred<void>();
let starts = 0;
/** The texts each conversation's runner calls came with, in call order. */
const order = new Map<string, string[]>();

beforeAll(async () => {
  plain = await startAdHocRunner({
    name: "plain",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      starts++;
      const c = ctx.conversation.conversation_id as string;
      order.set(c, [...(order.get(c) ?? []), ctx.input.text ?? ""]);
      await release.promise;
      try {
        w.reply(ctx.input.text ?? "");
      } catch {
        /* the host hung up (cancelled) */
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
const errorOf = async (id: string) => (await host.admin("GET", `/v1/runs/${id}`)).body.error?.message as string;

describe("interrupt and redelivered events", () => {
  it("a retried older message never cancels the newer message's run", async () => {
    const c = "interrupt-dup";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt" } });
    const first = await host.postEvent(messageEvent(c, "first"));
    expect(first.body.disposition).toBe("started");
    const end = Date.now() + 10_000;
    while (starts < 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    const killed: string[] = [];
    for (let i = 0; i < 40; i++) {
      // An older message, retried by its platform while a newer one comes in.
      const retries = Array.from({ length: 6 }, (_, k) =>
        new Promise((r) => setTimeout(r, k * 2)).then(() => host.postEvent(messageEvent(c, `older ${i}`, { event_id: `interrupt-dup-${i}` }))),
      );
      await new Promise((r) => setTimeout(r, i % 8));
      const newer = await host.postEvent(messageEvent(c, `newer ${i}`));
      const answers = await Promise.all(retries);
      const older = answers.find((a) => a.body.disposition !== "duplicate")!;
      expect(answers.filter((a) => a.body.disposition === "duplicate").length).toBe(5);
      await new Promise((r) => setTimeout(r, 80));
      // Whichever of the two was decided last interrupts the other; one of them must still be waiting or running.
      const statuses = [await statusOf(older.body.run_id!), await statusOf(newer.body.run_id!)];
      if (!statuses.some((s) => s === "created" || s === "running")) killed.push(`pair ${i}: older ${statuses[0]} (${await errorOf(older.body.run_id!)}), newer ${statuses[1]} (${await errorOf(newer.body.run_id!)})`);
    }
    expect(killed).toEqual([]);
  });
  it("an interrupting run answered started is next once the run it interrupted ends, ahead of another agent's run queued before it", async () => {
    const c = "interrupt-overtakes";
    await putAgent(host, { agent_id: `queueing-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, event_types: ["api.invoked"], concurrency: { strategy: "enqueue" } });
    await putAgent(host, { agent_id: `interrupting-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "interrupt" } });
    const before = starts;
    const r1 = await host.postEvent(messageEvent(c, "held"));
    const end = Date.now() + 10_000;
    while (starts === before && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    const r2 = await host.postEvent({ ...messageEvent(c, "queued behind"), event_type: "api.invoked" });
    expect(r2.body.disposition).toBe("queued");
    // The interrupting agent's own run is the one it supersedes.
    const r3 = await host.postEvent(messageEvent(c, "interrupting"));
    expect(r3.body.disposition).toBe("started");
    expect((await host.waitForRun(r1.body.run_id!)).status).toBe("cancelled");
    await expect.poll(() => statusOf(r3.body.run_id!), { timeout: 10_000 }).toBe("running");
    expect(await statusOf(r2.body.run_id!)).toBe("created");
  });
});

describe("interrupt racing another agent's run answered started that its alarm has not started yet", () => {
  it("the run answered started runs first; it is never overtaken and run after the newer event", async () => {
    const bad: string[] = [];
    for (let i = 0; i < 12; i++) {
      const c = `rv-int-race-${i}`;
      await putAgent(host, { agent_id: `q-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
      await putAgent(host, { agent_id: `i-${c}`, runner_id: plain.runnerId(), scope: { type: "conversation", id: c }, event_types: ["api.invoked"], concurrency: { strategy: "interrupt" } });
      const a = host.postEvent(messageEvent(c, "hold older"));
      await new Promise((r) => setTimeout(r, i % 4));
      const b = await host.postEvent({ ...messageEvent(c, "newer"), event_type: "api.invoked" });
      const older = await a;
      for (const until = Date.now() + 10_000; !order.get(c)?.length && Date.now() < until; ) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 100));
      if (older.body.disposition === "started") {
        const sOlder = await statusOf(older.body.run_id!);
        const sNewer = await statusOf(b.body.run_id!);
        const started = order.get(c) ?? [];
        // Runs hold here: the older one runs, the newer waits for it (told so), and only the older one has started.
        if (sOlder !== "running" || b.body.disposition !== "queued" || JSON.stringify(started) !== JSON.stringify(["hold older"])) {
          bad.push(`${c}: older ${sOlder} newer ${sNewer} (${b.body.disposition}), runner saw ${JSON.stringify(started)}`);
        }
      }
    }
    expect(bad).toEqual([]);
  }, 60_000);
});
