import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, startTestHost, type TestHost } from "../support/host";
import { rawHostApi } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";

/**
 * A runner's message may be ~1 MiB (the line limit), stored twice when its content is a list of elements (`content`
 * and `content_json`): ~2 MiB per item. `history.page` and `history.search` are answered by the conversation's
 * Durable Object across an RPC workerd limits to 32 MiB, and the operator's transcript page is built in the Worker:
 * each page is cut to a byte budget (4 MiB past its first item) in the database, as the run ledger's is, so a
 * conversation of 40 such items is still paged and searched.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const ITEMS_PER_RUN = 20;
const TEXT_BYTES = 1024 * 1024 - 4096;
const answers: Record<string, { status: number; bytes: number; body: string }> = {};

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "big-history",
    runners: [{ name: "default", label: { en_US: "big-history" }, capabilities: { streaming: true }, permissions: { history: ["page", "search"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const runId = ctx.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      let seq = 0;
      const send = (type: string, data: unknown) => res.write(`${JSON.stringify({ run_id: runId, type, data, sequence: ++seq })}\n`);
      if (ctx.input.text === "fill") {
        const words = "lorem ipsum dolor sit amet ".repeat(Math.ceil(TEXT_BYTES / 27)).slice(0, TEXT_BYTES);
        for (let i = 0; i < ITEMS_PER_RUN; i++) send("message.completed", { message: { role: "assistant", content: [{ type: "text", text: words }] } });
      } else {
        for (const [name, action, params] of [
          ["history.page (default limit)", "history.page", {}],
          ["history.search", "history.search", { query: "lorem", top_k: 50 }],
        ] as const) {
          const answer = await rawHostApi(ctx.runtime.api.base_url, runId, ctx.runtime.api.token, action, params);
          const text = await answer.text();
          answers[name] = { status: answer.status, bytes: text.length, body: text.slice(0, 120) };
        }
        send("message.completed", { message: { role: "assistant", content: "read" } });
      }
      send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "big-history" });
  for (let r = 0; r < 2; r++) {
    const fill = await host.postEvent(messageEvent("big-history", "fill"));
    expect((await host.waitForRun(fill.body.run_id!, 120_000)).status).toBe("completed");
  }
  const read = await host.postEvent(messageEvent("big-history", "read"));
  expect((await host.waitForRun(read.body.run_id!, 120_000)).status).toBe("completed");
}, 300_000);
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const MiB = 1024 * 1024;

describe("a conversation of 40 large messages", () => {
  it("can still be paged by its runner (history.page with the default limit)", () => {
    expect(answers["history.page (default limit)"].status).toBe(200);
  });
  it("can still be searched by its runner (history.search)", () => {
    expect(answers["history.search"].status).toBe(200);
  });
  it("gives the operator a bounded transcript page, as the ledger's", async () => {
    const res = await fetch(`${host.url}/v1/conversations/transcript?conversation_id=big-history&limit=200`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const bytes = (await res.arrayBuffer()).byteLength;
    // A ledger page is at most 1 MiB past its first entry (~2 MiB here). Observed: 200 with ~80 MiB.
    expect(bytes).toBeLessThan(4 * MiB);
  });
});
