import { createClient, type Client, type InArgs } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { EARLIER_READ_ROWS, readForEarlierReply } from "../../src/platforms/earlier-read-reply";
import type { Bot, NormalizedEvent } from "../../src/platforms/types";
import { conversationKey } from "../../src/stores/conversation-key";

/**
 * The look for a Slack thread's parent read for an earlier reply (README: a burst of replies reads it once) runs on
 * every reply in a thread: it must cost what the thread's newest records cost, not what its whole history does.
 */
let db: Db;
let client: Client;
let statements: { sql: string; params: unknown[] }[] = [];
const NOW = 10_000_000;
const THREAD_ROWS = 3_000;
const PARENT = "1700000000.000100";
const bot = { botId: "B1", platform: "slack", name: null, workspaceId: "W1", apiBaseUrl: "", credentials: {}, enabled: true, registeredAt: 0 } as Bot;
const inThread = conversationKey({ workspaceId: "W1", botId: "B1", conversationId: "C1", threadId: PARENT });
const reply = { conversationId: "C1", threadId: PARENT, repliedThreadId: null, replyTarget: { platform: "slack", channel: "C1", threadTs: PARENT } } as unknown as NormalizedEvent;
const readOf = (messageId: string) => JSON.stringify({ ts: "1", reply_to: { message_id: messageId, actor: null, text: "the plan", quote: null, attachments: [], unavailable: null } });

beforeAll(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  const executor = libsqlExecutor(client);
  db = createDb({ query: (q) => (statements.push(q), executor.query(q)), batch: executor.batch });
  const rows: { sql: string; args: InArgs }[] = [];
  const insert = (i: number, eventType: string, dataJson: string) => ({
    sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, thread_id, data_json, created_at) VALUES (?, ?, 'slack', 'B1', ?, 'C1', ?, ?, ?)",
    args: [`ev${i}`, eventType, inThread, PARENT, dataJson, NOW - THREAD_ROWS + i],
  });
  // A long thread, all of it within the last 10 minutes: its first reply read the parent, then it went on and on.
  rows.push(insert(0, "message.received", readOf(PARENT)));
  for (let i = 1; i < THREAD_ROWS; i++) rows.push(insert(i, i % 2 ? "message.received" : "delivery.sent", JSON.stringify({ ts: String(i), reply_to: null })));
  await client.batch(rows, "write");
  await client.execute("ANALYZE");
});

describe("a thread parent read for an earlier reply", () => {
  it("is looked for among the thread's newest records only, by the conversation index: a read further back is not taken, and nothing walks the thread", async () => {
    statements = [];
    expect(await readForEarlierReply(db, bot, reply, PARENT, NOW)).toBeNull();
    const [query] = statements;
    const plan = (await client.execute({ sql: `EXPLAIN QUERY PLAN ${query.sql}`, args: query.params as InArgs })).rows.map((r) => String(r.detail));
    expect(plan).toContainEqual(expect.stringMatching(/^SEARCH event_log USING INDEX event_log_conversation \(conversation_key=\?\)$/));
    expect(plan).toContainEqual(expect.stringMatching(/^SEARCH c USING INDEX event_log_conversation \(conversation_key=\? AND seq>\?\)$/));
    // Neither walks a table: only the capped rows are scanned (and sorted), as a co-routine's.
    expect(plan.filter((d) => /^SCAN (event_log|c)\b/.test(d))).toEqual([]);
    expect(query.params).toContain(EARLIER_READ_ROWS);
  });

  it("is taken while among them, and not once a recall of the parent is recorded after it", async () => {
    await client.execute({
      sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, thread_id, data_json, created_at) VALUES ('evRead', 'message.received', 'slack', 'B1', ?, 'C1', ?, ?, ?)",
      args: [inThread, PARENT, readOf(PARENT), NOW],
    });
    expect(await readForEarlierReply(db, bot, reply, PARENT, NOW)).toMatchObject({ message_id: PARENT, text: "the plan" });
    await client.execute({
      sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, data_json, created_at) VALUES ('evGone', 'message.recalled', 'slack', 'B1', ?, 'C1', ?, ?)",
      args: [conversationKey({ workspaceId: "W1", botId: "B1", conversationId: "C1", threadId: null }), JSON.stringify({ message_id: PARENT }), NOW],
    });
    expect(await readForEarlierReply(db, bot, reply, PARENT, NOW)).toBeNull();
  });
});
