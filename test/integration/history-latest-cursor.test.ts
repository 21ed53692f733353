import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * `latest_cursor` of an event with no transcript item of its own (a member
 * joined): `history.page(before_cursor)` returns the whole history as it
 * stood when the event arrived, newest item included, and
 * `history.page(after_cursor)` what was written since.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "latest-cursor",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "fail") {
        w.send("run.failed", { code: "test.fail", error: "no answer", retryable: false });
        return void res.end();
      }
      if (ctx.input.text === "slow") await new Promise((r) => setTimeout(r, 800));
      const page = (params: Record<string, unknown>) =>
        callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 50, ...params }).then((a) => a.body.data.items.map((i: { content: string }) => i.content));
      const cursor = ctx.context.latest_cursor;
      const seen = cursor ? { before: await page({ before_cursor: cursor, direction: "backward" }), after: await page({ after_cursor: cursor, direction: "forward" }) } : null;
      w.reply(JSON.stringify({ has_history_before: ctx.context.has_history_before, seen }));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "latest-cursor", eventTypes: ["message.received", "group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const joined = (conversation: string) => ({ event_type: "group.member_joined", conversation_id: conversation, actor: { actor_type: "user", actor_id: "u9" } });
async function reply(posted: Promise<{ body: { run_id: string | null } }>) {
  const run = await host.waitForRun((await posted).body.run_id!);
  return { status: run.status, ...(run.status === "completed" ? JSON.parse(String(run.message?.content)) : {}) };
}

describe("latest_cursor of an event without an item of its own", () => {
  it("pages the whole history before it, the newest item included", async () => {
    const hi = await reply(host.postEvent(messageEvent("latest-join", "hi")));
    expect(hi.seen).toEqual({ before: [], after: [] });
    const join = await reply(host.postEvent(joined("latest-join")));
    const hiReply = JSON.stringify({ has_history_before: false, seen: hi.seen });
    expect(join).toEqual({ status: "completed", has_history_before: true, seen: { before: [hiReply, "hi"], after: [] } });
  });

  it("never says there is history before it and then pages nothing", async () => {
    expect((await reply(host.postEvent(messageEvent("latest-one", "fail")))).status).toBe("failed");
    expect(await reply(host.postEvent(joined("latest-one")))).toEqual({ status: "completed", has_history_before: true, seen: { before: ["fail"], after: [] } });
  });

  it("pages what was written while it waited its turn after it, not before it", async () => {
    const slow = host.postEvent(messageEvent("latest-queued", "slow"));
    await slow;
    const join = reply(host.postEvent(joined("latest-queued")));
    const slowReply = await reply(slow);
    expect(await join).toEqual({ status: "completed", has_history_before: true, seen: { before: ["slow"], after: [JSON.stringify({ has_history_before: false, seen: slowReply.seen })] } });
  });
});
