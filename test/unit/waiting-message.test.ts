import { createClient, type Client, type InArgs } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { waitingMessage } from "../../src/stores/waiting-message";

/**
 * The lookup every recall or edit makes (README "A busy conversation": one database read) must cost what the runs
 * not ended cost, not what the chat's history does: a channel answered for years has a run per message.
 */
let db: Db;
let client: Client;
let statements: { sql: string; params: unknown[] }[] = [];
const ENDED_RUNS = 3_000;

beforeAll(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  const executor = libsqlExecutor(client);
  db = createDb({ query: (q) => (statements.push(q), executor.query(q)), batch: executor.batch });
  const rows: { sql: string; args: InArgs }[] = [];
  for (let i = 0; i <= ENDED_RUNS; i++) {
    // Threads of one channel, each its own conversation; the last message's run still waits.
    const key = `slack:B1:C1:t${i % 50}`;
    rows.push({
      sql: "INSERT INTO event_log (event_id, event_type, source, bot_id, conversation_key, conversation_id, data_json, run_id, disposition, created_at) VALUES (?, 'message.received', 'slack', 'B1', ?, 'C1', ?, ?, 'bound', ?)",
      args: [`ev${i}`, key, JSON.stringify({ ts: `17000${i}.0001` }), `run${i}`, i],
    });
    rows.push({
      sql: "INSERT INTO run (run_id, event_id, conversation_key, conversation_id, bot_id, agent_id, runner_id, status, result_count, created_at) VALUES (?, ?, ?, 'C1', 'B1', 'a', 'r', ?, 0, ?)",
      args: [`run${i}`, `ev${i}`, key, i === ENDED_RUNS ? "queued" : "completed", i],
    });
  }
  await client.batch(rows, "write");
  // As a long-lived database would have it: the planner then knows how few runs are not ended.
  await client.execute("ANALYZE");
});

describe("the message a recall or an edit names", () => {
  it("is found among the runs not ended by the run status index, never by walking the chat's runs", async () => {
    statements = [];
    const found = await waitingMessage(db, { botId: "B1", source: "slack", conversationId: "C1", field: "ts", id: `17000${ENDED_RUNS}.0001` });
    expect(found).toEqual({ eventId: `ev${ENDED_RUNS}`, conversationKey: `slack:B1:C1:t${ENDED_RUNS % 50}`, runId: `run${ENDED_RUNS}`, disposition: "bound" });
    expect(await waitingMessage(db, { botId: "B1", source: "slack", conversationId: "C1", field: "ts", id: "17000.0001" })).toBeUndefined();
    const [query] = statements;
    const plan = (await client.execute({ sql: `EXPLAIN QUERY PLAN ${query.sql}`, args: query.params as InArgs })).rows.map((r) => String(r.detail));
    expect(plan.filter((d) => /\br\b/.test(d))).toEqual([expect.stringMatching(/^SEARCH r USING INDEX run_status \(status=\?\)/)]);
  });
});
