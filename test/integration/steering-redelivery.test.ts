import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, keyedGates } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A platform (or client) retrying a message while it is being claimed: the
 * retry must answer `duplicate` and change nothing. The message must reach the
 * active run once, never twice.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;
const startedCount = new Map<string, number>();
const { gate, releaseAll } = keyedGates();

const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "steerer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const c: string = ctx.conversation.conversation_id;
      startedCount.set(c, (startedCount.get(c) ?? 0) + 1);
      await gate(c).promise;
      const items = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" })).body.data.items;
      w.reply(JSON.stringify({ pulled: items.map((i: any) => i.event.event_id) }));
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  releaseAll();
  await host?.dispose();
  await steerer?.close();
});

async function until(what: string, probe: () => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("steering and redelivered events", () => {
  it("a message retried while it is being claimed is claimed (and pulled) only once", async () => {
    const c = "steer-dup";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: steerer.runnerId(), scope: { type: "conversation", id: c } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    expect(first.body.disposition).toBe("started");
    await until("the first run to start", () => startedCount.get(c) === 1);

    const ids: string[] = [];
    // Each message is sent several times at once, as a platform retrying a slow acknowledgement would.
    for (let i = 0; i < 60; i++) {
      const id = `steer-dup-${i}`;
      ids.push(id);
      const answers = await Promise.all(Array.from({ length: 6 }, () => host.postEvent(messageEvent(c, `m${i}`, { event_id: id }))));
      expect(answers.filter((a) => a.body.disposition === "steered")).toHaveLength(1);
    }
    gate(c).resolve();
    const run = await host.waitForRun(first.body.run_id!);
    const pulled: string[] = JSON.parse(run.message!.content as string).pulled;
    const counts: Record<string, number> = {};
    for (const id of pulled) counts[id] = (counts[id] ?? 0) + 1;
    const twice = Object.entries(counts).filter(([, n]) => n > 1);
    // Every message exactly once, in claim order.
    expect(twice).toEqual([]);
    expect(pulled).toEqual(ids);
    const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected' AND run_id = ?", [first.body.run_id!]);
    expect(Number(injected[0].n)).toBe(ids.length);
  });
});
