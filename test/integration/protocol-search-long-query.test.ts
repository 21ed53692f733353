import { afterAll, beforeAll, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §8: `history.search` takes `query, filters?, top_k≤50`: no limit on the query. A runner searching the
 * history with the message it was given (input text may be up to 64 KiB) gets its matches, not a 400; the host
 * uses the first words of a long query anyway (MAX_QUERY_TERMS).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const answers: Record<string, { status: number; body: any }> = {};
const LONG = `invoice ${"please find the attached quarterly report ".repeat(40)}`;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "longq",
    runners: [{ name: "default", label: { en_US: "longq" }, permissions: { history: ["page", "search"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === LONG) answers.long = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.search", { query: ctx.input.text, top_k: 5 });
      return w.reply("ok");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "longq" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

it("history.search with the user's own (long) message as its query answers its matches", async () => {
  expect(LONG.length).toBeGreaterThan(1000);
  const first = await host.postEvent(messageEvent("longq", "the invoice is overdue"));
  await host.waitForRun(first.body.run_id!);
  const ev = await host.postEvent(messageEvent("longq", LONG));
  await host.waitForRun(ev.body.run_id!);
  expect([answers.long.status, answers.long.body.error?.code ?? null]).toEqual([200, null]);
  expect(answers.long.body.data.items.map((i: any) => i.content)).toContain("the invoice is overdue");
});
