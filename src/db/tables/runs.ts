/** The run ledger: one row per run, and every result of it in host order. */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Run ledger: one row per run. */
export const run = sqliteTable(
  "run",
  {
    runId: text("run_id").primaryKey(),
    eventId: text("event_id").notNull(),
    conversationKey: text("conversation_key").notNull(),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    workspaceId: text("workspace_id"),
    botId: text("bot_id"),
    agentId: text("agent_id").notNull(),
    runnerId: text("runner_id").notNull(),
    status: text("status").notNull(),
    finishReason: text("finish_reason"),
    finalMessageJson: text("final_message_json"),
    errorCode: text("error_code"),
    errorMessage: text("error_message"),
    resultCount: integer("result_count").notNull().default(0),
    /** The conversation's newest transcript seq when its event was recorded (0: none; null: recorded before migration 0015). */
    latestTranscriptSeq: integer("latest_transcript_seq"),
    /** The state epoch of the agent that bound its event ("" for an agent without one; null: recorded before migration 0016). */
    agentEpoch: text("agent_epoch"),
    createdAt: integer("created_at").notNull(),
    startedAt: integer("started_at"),
    endedAt: integer("ended_at"),
  },
  (t) => [
    index("run_conversation").on(t.conversationKey, t.createdAt),
    // The admin run listing: by conversation id and/or status, newest first, keyset-paged on (created_at, run_id).
    index("run_status").on(t.status, t.createdAt, t.runId),
    index("run_conversation_id").on(t.conversationId, t.createdAt, t.runId),
    index("run_created").on(t.createdAt, t.runId),
    // An agent's runs, newest first (GET /v1/runs?agent_id=): a page read from it, never a walk of every run.
    index("run_agent").on(t.agentId, t.createdAt, t.runId),
    // A bot's runs, a workspace's, newest first (GET /v1/runs?bot_id=, ?workspace_id=): likewise never a walk of every run.
    index("run_bot").on(t.botId, t.createdAt, t.runId),
    index("run_workspace").on(t.workspaceId, t.createdAt, t.runId),
  ],
);

/** Run ledger: every result (and host-made record) of a run, in host order. */
export const runEvent = sqliteTable(
  "run_event",
  {
    runId: text("run_id").notNull(),
    seq: integer("seq").notNull(),
    type: text("type").notNull(),
    dataJson: text("data_json").notNull(),
    runnerSequence: integer("runner_sequence"),
    origin: text("origin").notNull(), // "runner" | "host"
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.seq] }),
    // A run's host-made entries (few): its result_count, the runner's entries, is all its entries (counted in the primary
    // key's index) less these, so the end's write reads no row of a ledger of up to RUN_MAX_RESULTS entries (migration 0029).
    index("run_event_host").on(t.runId).where(sql`origin = 'host'`),
  ],
);
