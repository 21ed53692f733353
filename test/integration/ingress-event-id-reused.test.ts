import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README (Retention): "Once an EventLog row is gone, a redelivery of its event_id is no longer recognised as a
 * duplicate": the event is recorded afresh, with its own user item. Retention keeps each conversation's newest
 * transcript item, so the first event's user item can outlive its EventLog row (its run answered nothing). The new
 * event's run must still be told where its own item stands (PROTOCOL §5 ctx.context.transcript_seq / latest_cursor):
 * it was told the old item's seq, so `history.page(before_cursor)` hid what came before its message.
 */
const DAY_MS = 24 * 3600 * 1000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "reuse",
    runners: [{ name: "default", label: { en_US: "reuse" }, capabilities: {}, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      // The first message's run answers nothing, so its user item stays its conversation's newest.
      if (ctx.input.text === "first" && ctx.conversation.conversation_id === "reuse-conv") {
        w.send("run.failed", { code: "gave_up", error: "no answer", retryable: false });
        res.end();
        return;
      }
      const before = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", { before_cursor: ctx.context.latest_cursor, limit: 10 });
      w.reply(JSON.stringify({ context: ctx.context, before: before.body.data.items.map((i: { content: string }) => i.content) }));
    },
  });
  host = await startTestHost({ vars: { RETENTION_DAYS: "1" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "reuse" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("an event_id reused once retention removed its EventLog row", () => {
  it("runs with its own transcript item as its latest_cursor, not the old event's item kept by retention", async () => {
    const first = await host.postEvent(messageEvent("reuse-conv", "first", { event_id: "reused-id" }));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("failed");
    // Retention two days on: the EventLog row goes, the user item stays as its conversation's newest.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 2 * DAY_MS) });
    expect(await host.query("SELECT event_id FROM event_log WHERE event_id = 'reused-id'")).toEqual([]);
    expect(await host.query("SELECT seq FROM transcript WHERE event_id = 'reused-id'")).toEqual([{ seq: 1 }]);

    const again = await host.postEvent(messageEvent("reuse-conv", "second", { event_id: "reused-id" }));
    expect([again.status, again.body.disposition]).toEqual([202, "started"]);
    const run = await host.waitForRun(again.body.run_id!);
    expect(run.status).toBe("completed");
    const seen = JSON.parse(String(run.message?.content));
    // Its own item is seq 2; the one before it is the first message.
    expect(seen.context.transcript_seq).toBe(2);
    expect(seen.context.has_history_before).toBe(true);
    expect(seen.before).toEqual(["first"]);
  });
});

describe("a repeat without the input of a lost run's event", () => {
  /**
   * README: a repeat of an event recorded before migration 0019 (which has no fingerprint) "hands a lost run over [and]
   * runs it for the event as recorded (its actor, subject, data and input), whatever the repeat says." The event has its own user item; a repeat whose body left the input out (a
   * client that resends only the ids) handed the run over as if it had none: no transcript_seq, and a latest_cursor
   * in the gap after the message, so history.page(before_cursor) returned the message itself as earlier history.
   */
  it("is refused; of an event recorded before fingerprints, it gives the run its event's own item, as a repeat with the input does", async () => {
    const lost = await unhandedRun(host, "repeat-no-input", "lost-no-input", "hello");
    const own = await host.query<{ seq: number }>("SELECT seq FROM transcript WHERE event_id = 'lost-no-input' AND role = 'user'");
    const idsOnly = { event_id: "lost-no-input", event_type: "message.received", conversation_id: "repeat-no-input", actor: { actor_type: "user", actor_id: "u1" } };
    // It says less than the event did: no repeat of it, refused.
    expect((await host.postEvent(idsOnly)).body.error?.code).toBe("event_id_conflict");
    // An event recorded before migration 0019 has no fingerprint to compare it with: the repeat is taken as one.
    await host.query("UPDATE event_log SET fingerprint = NULL WHERE event_id = 'lost-no-input'");
    const repeat = await host.postEvent(idsOnly);
    expect(repeat.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    const run = await host.waitForRun(lost);
    expect(run.status).toBe("completed");
    const seen = JSON.parse(String(run.message?.content));
    expect({ transcript_seq: seen.context.transcript_seq, has_history_before: seen.context.has_history_before, before: seen.before }).toEqual({
      transcript_seq: own[0].seq,
      has_history_before: false,
      before: [],
    });
  });
});
