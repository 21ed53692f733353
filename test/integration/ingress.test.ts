import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { ADMIN_TOKEN, messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** Runs whose text starts with "hold:" wait here until the test releases them. */
const holds = new Map<string, ReturnType<typeof deferred<void>>>();
const timeline: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "ingress",
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text);
      timeline.push(`start ${text}`);
      const w = resultWriter(res, ctx.run_id);
      const hold = holds.get(text);
      if (hold) await hold.promise;
      timeline.push(`end ${text}`);
      w.reply(`echo ${text}`);
    },
  });
  host = await startTestHost({ vars: { MAX_EVENT_BODY_BYTES: String(64 * 1024) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "ingress" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const post = (body: string, token = ADMIN_TOKEN) =>
  fetch(`${host.url}/v1/events`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body });

describe("POST /v1/events", () => {
  it("refuses malformed JSON with 400 invalid_json", async () => {
    const res = await post("{not json");
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { code: "invalid_json", message: "request body is not valid JSON" } });
  });

  it("refuses a schema violation with 400 naming the field", async () => {
    const res = await post(JSON.stringify({ event_type: "message.received", actor: { actor_type: "user" }, extra: 1 }));
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_request");
    expect(body.error.message).toMatch(/conversation_id/);
    expect(body.error.message).toMatch(/extra/);
  });

  it("takes null for an optional field left unset, as a Python or Go client sends it", async () => {
    const body = { event_type: "message.received", conversation_id: "ing-nulls", thread_id: null, subject: null, data: null, metadata: null, actor: { actor_type: "user", actor_id: "u1", metadata: null }, input: { text: "nulls", contents: null, attachments: null } };
    const res = await post(JSON.stringify(body));
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    expect((await host.waitForRun(run_id)).message?.content).toBe("echo nulls");
  });

  it("refuses an id with an unpaired surrogate or a control character with 400, never a 500", async () => {
    // JSON can carry a lone surrogate ("\ud800"): valid JSON, not a valid id.
    for (const [field, value] of [["conversation_id", "room\\ud800"], ["workspace_id", "ws\\u0000x"], ["bot_id", "bot\\udc00"], ["thread_id", "t\\ud800"]]) {
      const res = await post(`{"event_type":"message.received","conversation_id":"c-ids","actor":{"actor_type":"user"},"input":{"text":"hi"},"${field}":"${value}"}`.replace(`"conversation_id":"c-ids",`, field === "conversation_id" ? "" : `"conversation_id":"c-ids",`));
      expect([field, res.status]).toEqual([field, 400]);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("invalid_request");
      expect(body.error.message).toMatch(new RegExp(field));
    }
  });

  it("refuses an event_id of \".\" or \"..\" with 400: GET /v1/events/{event_id} could never name it", async () => {
    for (const id of [".", ".."]) {
      const posted = await host.admin("POST", "/v1/events", messageEvent("c-dots", "hi", { event_id: id }));
      expect([id, posted.status, posted.body.error?.message]).toEqual([id, 400, expect.stringContaining("event_id")]);
    }
    // Dots within an id are fine, and the event reads back by it.
    const posted = await host.postEvent(messageEvent("c-dots", "hi", { event_id: "..a.." }));
    expect(posted.status).toBe(202);
    expect((await host.admin("GET", "/v1/events/..a..")).status).toBe(200);
  });

  it("refuses hostile nesting in data or metadata with 400, and records nothing", async () => {
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
    for (const field of ["data", "metadata"]) {
      const eventId = `deep-${field}`;
      const event = JSON.stringify({ ...messageEvent("deep", "x"), event_id: eventId }).slice(0, -1);
      const res = await post(`${event},"${field}":{"a":${deep}}}`);
      expect(res.status).toBe(400);
      expect(((await res.json()) as any).error.message).toBe(`invalid body: ${field}: JSON nested deeper than 65 levels`);
      expect(await host.query("SELECT event_id FROM event_log WHERE event_id = ?", [eventId])).toEqual([]);
    }
  });

  it("refuses an oversized body with 413", async () => {
    const res = await post(JSON.stringify(messageEvent("big", "x".repeat(100 * 1024))));
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe("payload_too_large");
  });

  it("refuses a missing or wrong admin token with 401", async () => {
    expect((await post(JSON.stringify(messageEvent("auth", "hi")), "wrong-token")).status).toBe(401);
    const res = await fetch(`${host.url}/v1/events`, { method: "POST", body: JSON.stringify(messageEvent("auth", "hi")) });
    expect(res.status).toBe(401);
    expect(((await res.json()) as any).error.code).toBe("unauthorized");
  });

  it("gives one run for the same event_id sent three times", async () => {
    const before = runner.calls.length;
    const event = messageEvent("idem", "once", { event_id: "idem-event-1" });
    const first = await host.postEvent(event);
    const second = await host.postEvent(event);
    const third = await host.postEvent(event);
    expect(first.status).toBe(202);
    expect(first.body.disposition).toBe("started");
    for (const repeat of [second, third]) {
      expect(repeat.status).toBe(200);
      expect(repeat.body).toEqual({ event_id: "idem-event-1", run_id: first.body.run_id, disposition: "duplicate" });
    }
    await host.waitForRun(first.body.run_id!);
    const runs = await host.admin("GET", "/v1/runs?conversation_id=idem");
    expect(runs.body.items).toHaveLength(1);
    await afterEverythingIn("idem");
    expect(runner.calls.length - before).toBe(2); // the first and the marker
    expect(timeline.filter((t) => t === "start once")).toHaveLength(1);
    const after = await host.admin("GET", "/v1/runs?conversation_id=idem");
    expect(after.body.items.filter((r: { event_id: string }) => r.event_id === "idem-event-1")).toHaveLength(1);
  });

  it("refuses an event_id whose event said something else with 409 event_id_conflict, recording nothing; the same event however spelled is a duplicate", async () => {
    const event = messageEvent("idem-differs", "the first words", { event_id: "idem-differs-1", data: { order: 7 } });
    const first = await host.postEvent(event);
    expect(first.status).toBe(202);
    // The same event: keys in another order, unset fields sent as null, another event_time (a client stamping each attempt).
    const respelled = { data: { order: 7 }, input: { attachments: null, text: "the first words" }, actor: { actor_id: "u1", actor_type: "user", metadata: null }, thread_id: null, conversation_id: "idem-differs", event_type: "message.received", event_id: "idem-differs-1", event_time: new Date().toISOString() };
    expect(await host.postEvent(respelled)).toEqual({ status: 200, body: { event_id: "idem-differs-1", run_id: first.body.run_id, disposition: "duplicate" } });
    for (const changed of [{ input: { text: "other words" } }, { input: {} }, { data: { order: 8 } }, { actor: { actor_type: "user", actor_id: "u2" } }, { event_type: "api.invoked" }]) {
      const res = await host.postEvent({ ...event, ...changed });
      expect([changed, res.status, res.body.error?.code]).toEqual([changed, 409, "event_id_conflict"]);
    }
    await host.waitForRun(first.body.run_id!);
    expect(await host.query("SELECT content FROM transcript WHERE event_id = 'idem-differs-1' ORDER BY seq")).toEqual([{ content: "the first words" }, { content: "echo the first words" }]);
    expect((await host.admin("GET", "/v1/events/idem-differs-1")).body).toMatchObject({ event_type: "message.received", actor_id: "u1", input: { text: "the first words" }, data: { order: 7 } });
    expect((await host.admin("GET", "/v1/runs?conversation_id=idem-differs")).body.items).toHaveLength(1);
    // An event recorded before there were fingerprints (migration 0019) has none to compare: a repeat of its id is a duplicate, as it was.
    await host.query("UPDATE event_log SET fingerprint = NULL WHERE event_id = 'idem-differs-1'");
    expect((await host.postEvent({ ...event, input: { text: "other words" } })).body).toMatchObject({ disposition: "duplicate", run_id: first.body.run_id });
  });

  it("makes a second message to a busy conversation wait for the active run (enqueue)", async () => {
    const hold = deferred();
    holds.set("hold:first", hold);
    const first = await host.postEvent(messageEvent("busy", "hold:first"));
    await waitFor(() => timeline.includes("start hold:first"));
    const second = await host.postEvent(messageEvent("busy", "second"));
    expect(second.body.disposition).toBe("queued");
    await new Promise((r) => setTimeout(r, 150));
    expect(timeline).not.toContain("start second");
    hold.resolve();
    const [r1, r2] = await Promise.all([host.waitForRun(first.body.run_id!), host.waitForRun(second.body.run_id!)]);
    expect([r1.status, r2.status]).toEqual(["completed", "completed"]);
    expect(timeline.indexOf("start second")).toBeGreaterThan(timeline.indexOf("end hold:first"));
  });

  it("never runs a re-delivered event twice, even while it is still queued", async () => {
    const hold = deferred();
    holds.set("hold:redeliver", hold);
    const first = await host.postEvent(messageEvent("redeliver", "hold:redeliver"));
    await waitFor(() => timeline.includes("start hold:redeliver"));
    const event = messageEvent("redeliver", "queued once", { event_id: "redeliver-queued" });
    const queued = await host.postEvent(event);
    expect(queued.body.disposition).toBe("queued");
    // The repeat finds its run still queued and hands it to the DO again; the DO and the run status refuse a second run.
    expect((await host.postEvent(event)).body).toMatchObject({ disposition: "duplicate", run_id: queued.body.run_id });
    // The id taken in another conversation is a collision, not a repeat: 409, recording nothing and never taking the run there.
    const elsewhere = await host.postEvent({ ...event, conversation_id: "redeliver-elsewhere" });
    expect([elsewhere.status, elsewhere.body.error?.code]).toEqual([409, "event_id_conflict"]);
    expect(elsewhere.body.error?.message).toContain("another conversation");
    expect(await host.query("SELECT 1 FROM transcript WHERE conversation_id = 'redeliver-elsewhere'")).toEqual([]);
    hold.resolve();
    await host.waitForRun(first.body.run_id!);
    expect((await host.waitForRun(queued.body.run_id!)).status).toBe("completed");
    await afterEverythingIn("redeliver");
    expect(timeline.filter((t) => t === "start queued once")).toHaveLength(1);
    expect(timeline.indexOf("start queued once")).toBeGreaterThan(timeline.indexOf("end hold:redeliver"));
    expect(runner.calls.filter((c) => c.body.context.input.text === "queued once").map((c) => c.body.context.conversation.conversation_id)).toEqual(["redeliver"]);
  });

  it("cancels an active run on operator request and answers 404 for an unknown run", async () => {
    const hold = deferred();
    holds.set("hold:cancel", hold);
    const ev = await host.postEvent(messageEvent("cancel", "hold:cancel"));
    await waitFor(() => timeline.includes("start hold:cancel"));
    const res = await host.admin("POST", `/v1/runs/${ev.body.run_id}/cancel`);
    expect(res.status).toBe(202);
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run).toMatchObject({ status: "cancelled", error: { code: "cancelled" } });
    hold.resolve();
    const again = await host.admin("POST", `/v1/runs/${ev.body.run_id}/cancel`);
    expect(again).toMatchObject({ status: 409, body: { error: { code: "conflict", message: expect.stringMatching(/already ended \(cancelled\)/) }, cancelled: false, status: "cancelled" } });
    expect((await host.admin("GET", "/v1/runs/run_unknown")).status).toBe(404);
  });

  it("ends a run cancelled while it waits with run.failed {code: cancelled} in its ledger and in EventLog (§11)", async () => {
    const hold = deferred();
    holds.set("hold:cancel-queued", hold);
    const active = await host.postEvent(messageEvent("cancel-queued", "hold:cancel-queued"));
    await waitFor(() => timeline.includes("start hold:cancel-queued"));
    const waiting = await host.postEvent(messageEvent("cancel-queued", "never started"));
    expect(waiting.body.disposition).toBe("queued");
    // Not started yet: `created` (§11), in the run view and in the listing's status filter.
    expect((await host.admin("GET", `/v1/runs/${waiting.body.run_id}`)).body.status).toBe("created");
    const created = (await host.admin("GET", "/v1/runs?conversation_id=cancel-queued&status=created")).body.items;
    expect(created.map((r: { run_id: string }) => r.run_id)).toEqual([waiting.body.run_id]);
    // A follower of the waiting run hears its end live, as a replay would tell it.
    const follower = fetch(`${host.url}/v1/runs/${waiting.body.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }).then((r) => r.text());
    expect((await host.admin("POST", `/v1/runs/${waiting.body.run_id}/cancel`)).status).toBe(202);
    expect(await host.waitForRun(waiting.body.run_id!)).toMatchObject({ status: "cancelled", error: { code: "cancelled" } });
    const ledger = (await host.admin("GET", `/v1/runs/${waiting.body.run_id}/events`)).body.items;
    expect(ledger).toMatchObject([{ type: "run.failed", origin: "host", data: { code: "cancelled", retryable: false } }]);
    const records = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [waiting.body.run_id]);
    expect(records.map((r) => JSON.parse(r.data_json))).toMatchObject([{ run_id: waiting.body.run_id, code: "cancelled" }]);
    const live = await follower;
    expect(live).toMatch(/event: result\ndata: \{"seq":1,"type":"run\.failed".*"code":"cancelled"/);
    expect(live).toContain('"status":"cancelled"');
    hold.resolve();
    expect((await host.waitForRun(active.body.run_id!)).status).toBe("completed");
    expect(timeline).not.toContain("start never started");
  });

  it("still runs a run the previous Worker recorded as `queued`, before migration 0005 renamed it (README: deploy, then migrate)", async () => {
    const hold = deferred();
    holds.set("hold:rollout", hold);
    const active = await host.postEvent(messageEvent("rollout", "hold:rollout"));
    await waitFor(() => timeline.includes("start hold:rollout"));
    const waiting = await host.postEvent(messageEvent("rollout", "accepted by the old version"));
    expect(waiting.body.disposition).toBe("queued");
    // Until migration 0005 runs, rows written by the previous Worker keep the old name.
    await host.query("UPDATE run SET status = 'queued' WHERE run_id = ?", [waiting.body.run_id!]);
    hold.resolve();
    expect((await host.waitForRun(active.body.run_id!)).status).toBe("completed");
    // Neither dropped silently nor stuck: the run starts once its turn comes.
    expect((await host.waitForRun(waiting.body.run_id!, 10_000)).status).toBe("completed");
    expect(timeline).toContain("start accepted by the old version");
  });

  it("cancels a run left queued in libSQL whose hand-over to its conversation was lost", async () => {
    const done = await host.postEvent(messageEvent("lost-dispatch", "first"));
    await host.waitForRun(done.body.run_id!);
    // As if ingress had recorded a second run and then failed to reach the DO: same conversation, same DO id prefix.
    const lost = done.body.run_id!.replace(/_[^_]+$/, "_lostdispatch1");
    await host.query("INSERT INTO run (run_id, event_id, conversation_key, conversation_id, agent_id, runner_id, status, created_at) SELECT ?, event_id, conversation_key, conversation_id, agent_id, runner_id, 'created', created_at FROM run WHERE run_id = ?", [lost, done.body.run_id!]);
    expect((await host.admin("GET", `/v1/runs/${lost}`)).body.status).toBe("created");
    const res = await host.admin("POST", `/v1/runs/${lost}/cancel`);
    expect(res).toMatchObject({ status: 202, body: { cancelled: true } });
    expect((await host.admin("GET", `/v1/runs/${lost}`)).body).toMatchObject({ status: "cancelled", error: { code: "cancelled", message: "run cancelled before it reached its conversation" } });
    expect((await host.admin("GET", `/v1/runs/${lost}/events`)).body.items).toMatchObject([{ type: "run.failed", origin: "host", data: { code: "cancelled" } }]);
    expect(await host.query("SELECT 1 FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [lost])).toHaveLength(1);
    // Ended runs are not cancelled again, and a completed one is left alone.
    expect((await host.admin("POST", `/v1/runs/${lost}/cancel`)).status).toBe(409);
    expect((await host.admin("POST", `/v1/runs/${done.body.run_id}/cancel`)).status).toBe(409);
    expect((await host.admin("GET", `/v1/runs/${done.body.run_id}`)).body.status).toBe("completed");
  });

  it("tells a run where the history stands, for events with and without a message of their own", async () => {
    const agent = { agent_id: "ctx-history", name: "h", runner_id: runner.runnerId(), event_types: ["message.received", "group.member_joined"], scope: { type: "workspace", id: "w-history" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const post = (c: string, event: Record<string, unknown>) => host.postEvent({ ...event, conversation_id: c, workspace_id: "w-history" });
    const joined = { event_type: "group.member_joined", actor: { actor_type: "user", actor_id: "u9" } };
    const contextOf = async (posted: Awaited<ReturnType<typeof post>>) => {
      await host.waitForRun(posted.body.run_id!);
      return runner.calls.find((call) => call.body.context.run_id === posted.body.run_id)!.body.context.context;
    };
    // A join into an empty conversation: no history, no item of its own.
    expect(await contextOf(await post("ctx-empty", joined))).toMatchObject({ has_history_before: false, latest_cursor: null, transcript_seq: null });
    // A first message: its own item is the first.
    const first = await contextOf(await post("ctx-history", messageEvent("", "hi")));
    expect(first).toMatchObject({ has_history_before: false, transcript_seq: 1 });
    // A join after it comes after the whole history (the reply included), with no item of its own.
    const later = await contextOf(await post("ctx-history", joined));
    expect(later).toMatchObject({ has_history_before: true, transcript_seq: null });
    expect(later.latest_cursor).toEqual(expect.any(String));
    expect(later.latest_cursor).not.toBe(first.latest_cursor);
  });

  it("keeps two conversations isolated and concurrent", async () => {
    const a = deferred();
    holds.set("hold:a", a);
    const ra = await host.postEvent(messageEvent("iso-a", "hold:a"));
    const rb = await host.postEvent(messageEvent("iso-b", "b runs meanwhile"));
    // b finishes while a is still held: no cross-conversation queueing.
    const runB = await host.waitForRun(rb.body.run_id!);
    expect(runB.message?.content).toBe("echo b runs meanwhile");
    expect((await host.admin("GET", `/v1/runs/${ra.body.run_id}`)).body.status).toBe("running");
    a.resolve();
    expect((await host.waitForRun(ra.body.run_id!)).message?.content).toBe("echo hold:a");
  });
});

/**
 * A barrier instead of a sleep: a conversation's runs go one after another, so
 * once a marker event posted now has run, any run an earlier event could
 * have started has run too.
 */
async function afterEverythingIn(conversationId: string) {
  const marker = await host.postEvent(messageEvent(conversationId, `marker ${conversationId}`));
  expect((await host.waitForRun(marker.body.run_id!)).status).toBe("completed");
}

async function waitFor(cond: () => boolean, timeoutMs = 5000) {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
