import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README (history.page): for an event without an item of its own (a member joined), `latest_cursor` "names the
 * point just after the newest item when the event arrived: before_cursor gives the whole history then,
 * after_cursor what was written since". A repeat of the event that hands over its lost run must give that run
 * the same point: the event arrived once, when it was first recorded, not when a client sent it again.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen = new Map<string, { before: string[]; after: string[] }>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "latest-redelivery",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const page = (params: Record<string, unknown>) =>
        callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { limit: 50, ...params }).then((a) => a.body.data.items.map((i: { content: string }) => i.content));
      const cursor = ctx.context.latest_cursor;
      seen.set(ctx.run_id, { before: await page({ before_cursor: cursor, direction: "backward" }), after: await page({ after_cursor: cursor, direction: "forward" }) });
      w.reply(`re: ${ctx.event.event_type} ${ctx.input.text ?? ""}`.trim());
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "latest-redelivery", eventTypes: ["message.received", "group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("latest_cursor of a redelivered event without an item of its own", () => {
  it("still names the point where the event first arrived, so messages written since are after it, not before", async () => {
    const conv = "redeliver-join";
    const hi = await host.postEvent(messageEvent(conv, "hi"));
    await host.waitForRun(hi.body.run_id!);
    // The join arrives and is recorded; its hand-over to the conversation is lost (the run stays `created`).
    const joined = { event_id: "join-redelivered-1", event_type: "group.member_joined", conversation_id: conv, actor: { actor_type: "user", actor_id: "u9" } };
    const first = await host.postEvent(joined);
    await host.waitForRun(first.body.run_id!);
    const lost = first.body.run_id!.replace(/_[^_]+$/, "_lostjoin");
    await host.query(
      "INSERT INTO run (run_id, event_id, conversation_key, conversation_id, agent_id, runner_id, status, latest_transcript_seq, created_at) SELECT ?, event_id, conversation_key, conversation_id, agent_id, runner_id, 'created', latest_transcript_seq, created_at FROM run WHERE run_id = ?",
      [lost, first.body.run_id!],
    );
    await host.query("UPDATE event_log SET run_id = ? WHERE event_id = ?", [lost, joined.event_id]);
    // The conversation goes on after the join arrived.
    const later = await host.postEvent(messageEvent(conv, "later"));
    await host.waitForRun(later.body.run_id!);
    // The platform (or client) sends the join again: the lost run is handed over and runs now.
    const repeat = await host.postEvent(joined);
    expect(repeat.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    expect((await host.waitForRun(lost)).status).toBe("completed");

    // The first (normal) run of the join saw the history as it stood when the join arrived.
    expect(seen.get(first.body.run_id!)).toEqual({ before: ["re: message.received hi", "hi"], after: [] });
    // The handed-over run is for the same event: "later" came after the join arrived.
    expect(seen.get(lost)).toEqual({ before: ["re: message.received hi", "hi"], after: ["re: group.member_joined", "later", "re: message.received later"] });
  });
});
