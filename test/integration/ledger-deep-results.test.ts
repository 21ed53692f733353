import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Loose `tool.call.completed` telemetry and unknown result types are kept in the
 * run ledger as sent, but never nested deeper than any JSON the host accepts
 * elsewhere (MAX_JSON_DEPTH): a runner that sends one result nested very deep
 * (here 200k levels, a ~400 KB line, within the 1 MiB line limit) fails its run
 * as a protocol error, and the run's ledger pages still answer. "As sent" holds for `data: null` too.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const DEPTH = 200_000;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "deep",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "null") {
        // Loose telemetry, an unknown type and a strict payload (dropped), each with `data: null`.
        for (const [i, type] of ["tool.call.started", "x.custom", "message.delta"].entries()) res.write(`{"run_id":"${ctx.run_id}","type":"${type}","data":null,"sequence":${i + 1}}\n`);
        w.send("message.completed", { message: { role: "assistant", content: "done" } }, 4);
        w.send("run.completed", { finish_reason: "stop" }, 5);
        res.end();
        return;
      }
      const deep = "[".repeat(DEPTH) + "]".repeat(DEPTH);
      const type = ctx.input.text === "unknown" ? "x.custom" : "tool.call.completed";
      const data = type === "x.custom" ? deep : `{"tool_call_id":"t1","tool_name":"calc","result":${deep}}`;
      res.write(`{"run_id":"${ctx.run_id}","type":"${type}","data":${data},"sequence":1}\n`);
      w.send("message.completed", { message: { role: "assistant", content: "done" } }, 2);
      w.send("run.completed", { finish_reason: "stop" }, 3);
      res.end();
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "deep" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a result nested deeper than any JSON the host accepts elsewhere", () => {
  for (const mode of ["tool", "unknown"]) {
    it(`(${mode}) does not make the run's ledger page answer 500`, async () => {
      const ev = await host.postEvent(messageEvent(`deep-${mode}`, mode));
      const run = await host.waitForRun(ev.body.run_id!);
      const page = await host.admin("GET", `/v1/runs/${run.run_id}/events`);
      expect({ status: page.status, code: page.body?.error?.code }).toEqual({ status: 200, code: undefined });
    });
  }
});

describe("a result sent with data null", () => {
  it("is in the ledger with data null, not an empty object", async () => {
    const ev = await host.postEvent(messageEvent("null-data", "null"));
    const run = await host.waitForRun(ev.body.run_id!);
    const page = await host.admin("GET", `/v1/runs/${run.run_id}/events`);
    const sent = page.body.items.filter((e: { origin: string; sequence?: number }) => e.origin === "runner" && e.sequence! <= 3);
    expect(sent.map((e: { type: string; data: unknown }) => [e.type, e.data])).toEqual([["tool.call.started", null], ["x.custom", null], ["message.delta", null]]);
  });
});
