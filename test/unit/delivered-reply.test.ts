import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { deliveredReply } from "../../src/platforms/delivered-reply";
import type { Bot, NormalizedEvent } from "../../src/platforms/types";
import { deleteOldTranscript } from "../../src/retention/transcript";
import { conversationKey } from "../../src/stores/conversation-key";
import { deletedAnswerStatement } from "../../src/stores/deleted-answer";
import { hostRecordInsert } from "../../src/stores/event-log";
import { transcriptInsert } from "../../src/stores/transcript";

/**
 * A reply to the bot's own answer read from its delivery record (README: a parent the bot delivered, deleted since,
 * is read from Slack, which says so), on a real libSQL database written by the host's own statements.
 */
let db: Db;
let client: Client;
const bot = { botId: "B1", platform: "slack", name: null, workspaceId: "W1", apiBaseUrl: "", credentials: {}, enabled: true, registeredAt: 0 } as Bot;
const inChannel = { conversationKey: conversationKey({ workspaceId: "W1", botId: "B1", conversationId: "C1", threadId: null }), conversationId: "C1", threadId: null, workspaceId: "W1", botId: "B1" };
const ANSWER = "1700000000.000100";
const reply = { conversationId: "C1", threadId: ANSWER, repliedThreadId: null, replyTarget: { platform: "slack", channel: "C1", threadTs: ANSWER } } as unknown as NormalizedEvent;

/** A delivery call's record as the trail writes it (delivery/records.ts): the message it posted or edited named by its ts. */
const delivered = (operation: "send" | "edit", ts = ANSWER) =>
  hostRecordInsert(db, { eventType: "delivery.succeeded", ...inChannel, runId: "run1", data: { run_id: "run1", event_id: "ev1", operation, item: 1, message_id: ts }, messageRef: ts });
/** The answer's second part, split off: a message of its own. */
const SECOND_PART = "1700000000.000200";

/** A database of its own, migrated as a fresh one is. */
async function freshDb(): Promise<{ client: Client; db: Db }> {
  const c = createClient({ url: ":memory:" });
  await migrate(drizzle(c), { migrationsFolder: "migrations" });
  return { client: c, db: createDb(libsqlExecutor(c)) };
}

beforeAll(async () => {
  ({ client, db } = await freshDb());
  await client.execute({ sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, run_id, created_at) VALUES ('ev1', 'message.received', 'slack', 'B1', ?, 'C1', 'run1', 1)", args: [inChannel.conversationKey] });
  await client.execute({ sql: "INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, latest_transcript_seq, created_at) VALUES ('run1', 'ev1', ?, 'a1', 'r1', 'completed', 0, 1)", args: [inChannel.conversationKey] });
  await transcriptInsert(db, { transcriptId: "tr1", conversationKey: inChannel.conversationKey, eventId: "ev1", runId: "run1", conversationId: "C1", threadId: null, role: "assistant", itemType: "message", content: "the plan", artifactRefs: [] }).execute();
});

describe("the bot's answer replied to, from its delivery record", () => {
  it("is deleted once any of its records bears the deletion's mark, whatever was recorded of it after (an edit's write landing late)", async () => {
    await delivered("send");
    await delivered("send", SECOND_PART);
    expect(await deliveredReply(db, bot, reply, ANSWER)).toEqual({ text: "the plan", files: [] });
    await deletedAnswerStatement(db, { botId: "B1", registeredAt: 0, conversationId: "C1", messageRef: ANSWER, eventId: "evGone" }, new Date().toISOString());
    expect(await deliveredReply(db, bot, reply, ANSWER)).toBeNull();
    // The stream's next edit, made on the message before Slack deleted it, recorded after the deletion was.
    await delivered("edit");
    expect(await deliveredReply(db, bot, reply, ANSWER)).toBeNull();
    // Only that message's: its other part, still in the channel, is taken as recorded.
    expect(await deliveredReply(db, bot, { ...reply, threadId: SECOND_PART }, SECOND_PART)).toEqual({ text: "the plan", files: [] });
  });
});

describe("the bot's answer replied to, once retention deleted its run's first items", () => {
  const DAY_MS = 24 * 3600 * 1000;
  const place = { ...inChannel, conversationKey: conversationKey({ workspaceId: "W1", botId: "B1", conversationId: "C2", threadId: null }), conversationId: "C2" };
  // The walks' place between invocations, as retention keeps it in R2.
  const stored = new Map<string, string>();
  const bucket = {
    delete: async () => {},
    get: async (key: string) => (stored.has(key) ? { json: async () => JSON.parse(stored.get(key)!) } : null),
    put: async (key: string, value: string) => void stored.set(key, value),
  } as unknown as R2Bucket;

  it("is not taken by counting from the items left, which would give another message's words: the platform is asked", async () => {
    // Its own database: retention walks the transcript in insertion order, which holds no item of the other test.
    const { client, db } = await freshDb();
    const old = Date.now() - 3 * DAY_MS;
    await client.execute({ sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, run_id, created_at) VALUES ('ev2', 'message.received', 'slack', 'B1', ?, 'C2', 'run2', ?)", args: [place.conversationKey, old] });
    await client.execute({ sql: "INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, latest_transcript_seq, created_at) VALUES ('run2', 'ev2', ?, 'a1', 'r1', 'completed', 1, ?)", args: [place.conversationKey, old] });
    // The question, an interim answer before the retention cutoff; the answer and a follow-up message of the run after it.
    const items: [string, string, string | null, number][] = [["user", "what is the plan?", null, old], ["assistant", "one moment", "run2", old + 1], ["assistant", "the plan", "run2", Date.now()], ["assistant", "anything else?", "run2", Date.now()]];
    for (const [i, [role, content, runId, at]] of items.entries()) {
      await client.execute({ sql: "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, run_id, role, item_type, content, created_at) VALUES (?, ?, ?, 'ev2', ?, ?, 'message', ?, ?)", args: [`tr2-${i}`, place.conversationKey, i + 1, runId, role, content, at] });
    }
    const answer = "1700000100.000100";
    await hostRecordInsert(db, { eventType: "delivery.succeeded", ...place, runId: "run2", data: { run_id: "run2", event_id: "ev2", operation: "send", item: 2, message_id: answer }, messageRef: answer });
    const replyHere = { ...reply, conversationId: "C2", threadId: answer, replyTarget: { platform: "slack", channel: "C2", threadTs: answer } } as unknown as NormalizedEvent;
    expect(await deliveredReply(db, bot, replyHere, answer)).toEqual({ text: "the plan", files: [] });
    expect(await deleteOldTranscript(db, bucket, Date.now() - DAY_MS, { batchSize: 100, maxBatches: 10 })).toBe(2);
    expect(await deliveredReply(db, bot, replyHere, answer)).toBeNull();
  });
});

describe("the bot's answer replied to, its files named by its elements", () => {
  it("brings only those its run could read, as delivery sent only those: never another user's private file or another conversation's", async () => {
    const { client, db } = await freshDb();
    const place = { ...inChannel, conversationKey: conversationKey({ workspaceId: "W1", botId: "B1", conversationId: "C3", threadId: null }), conversationId: "C3" };
    const now = Date.now();
    const event = (id: string, metadata: Record<string, unknown>) =>
      client.execute({ sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, metadata_json, created_at) VALUES (?, 'message.received', 'slack', 'B1', ?, 'C3', ?, ?)", args: [id, place.conversationKey, JSON.stringify(metadata), now] });
    await event("ev3", {});
    // Another user's message only they saw (a press on an ephemeral message), and the file it brought.
    await event("evPrivate", { private_audience: "slack_ephemeral:U9" });
    await client.execute({ sql: "INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, latest_transcript_seq, created_at) VALUES ('run3', 'ev3', ?, 'a1', 'r1', 'completed', 0, ?)", args: [place.conversationKey, now] });
    const file = (id: string, key: string, source: string, runId: string | null, metadata: Record<string, unknown>) =>
      client.execute({ sql: "INSERT INTO artifact (artifact_id, artifact_type, mime_type, name, source, conversation_key, run_id, r2_key, metadata_json, created_at) VALUES (?, 'image', 'image/png', ?, ?, ?, ?, ?, ?, ?)", args: [id, `${id}.png`, source, key, runId, `artifacts/${id}`, JSON.stringify(metadata), now] });
    await file("art_mine", place.conversationKey, "runner", "run3", {});
    await file("art_private", place.conversationKey, "input", null, { event_id: "evPrivate" });
    await file("art_elsewhere", inChannel.conversationKey, "runner", "run1", {});
    // The runner named all three in its answer; delivery sent only its own.
    const parts = [{ type: "text", text: "here" }, { type: "file", artifact_id: "art_mine", name: "as the runner named it.bin" }, { type: "image", artifact_id: "art_private" }, { type: "image", artifact_id: "art_elsewhere" }];
    await client.execute({ sql: "INSERT INTO transcript (transcript_id, conversation_key, seq, event_id, run_id, role, item_type, content, content_json, created_at) VALUES ('tr3', ?, 1, 'ev3', 'run3', 'assistant', 'message', 'here', ?, ?)", args: [place.conversationKey, JSON.stringify(parts), now] });
    const answer = "1700000300.000100";
    await hostRecordInsert(db, { eventType: "delivery.succeeded", ...place, runId: "run3", data: { run_id: "run3", event_id: "ev3", operation: "send", item: 1, message_id: answer }, messageRef: answer });
    const replyHere = { ...reply, conversationId: "C3", threadId: null, repliedThreadId: null, replyTarget: { platform: "slack", channel: "C3", threadTs: null } } as unknown as NormalizedEvent;
    // Its stored facts, as delivery sent it: an image named as stored.
    const mine = { ref: "art_mine", artifactId: "art_mine", name: "art_mine.png", mimeType: "image/png", artifactType: "image", repliedMessageId: answer };
    expect(await deliveredReply(db, bot, replyHere, answer)).toEqual({ text: "here", files: [mine] });
  });
});
